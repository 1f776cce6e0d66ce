"""Verify shards byte for byte: what ``fm verify`` runs on a release, usable by any trainer before a long run.

``verify_shard(name, tar, idx, report)`` checks one shard (tar and idx as bytes; problems are appended to
``report``, a :class:`VerifyReport`): the index's footer, then every row's sample (all its members
with their tar headers and padding) against the index's sample checksum, the tokens and doclens checksums
(and the per-token columns' checksum in format version 3),
that samples tile the tar with nothing between them, and the tar's end-of-archive blocks.
``verify_dataset(manifest_path_or_uri, storage_options=None) -> VerifyReport`` does that for every shard of a manifest after checking each file's size and
sha256 against the manifest, and reports every problem found (not only the first), e.g.::

    report = fm_loader.verify_dataset("datasets/web/v1/manifest.json")  # also fm_loader.verify_shard
    if not report.ok:
        for problem in report.problems: print(problem.shard, problem.row, problem.what)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fm_loader.format import (
    FLAG_SAMPLE_CHECKSUMS,
    CorruptIndexError,
    RowIndex,
    decode_index,
    row_checksum,
    row_columns,
    sample_checksum32,
)
from fm_loader.manifest import DatasetManifest
from fm_loader.media.manifest import MediaManifest
from fm_loader.storage import read_bytes

_BLOCK = 512


@dataclass(frozen=True)
class Problem:
    """One damaged thing: ``row`` is None for shard-level problems."""

    shard: str
    what: str
    row: int | None = None


@dataclass
class VerifyReport:
    shards: int = 0
    rows: int = 0
    bytes: int = 0
    unchecked_members: int = 0  # shards whose index predates sample checksums (tokens/doclens checked only)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _sample_end(index: RowIndex, row: int) -> int:
    rec = index.records[row]
    size = int(rec["n_tokens"]) * index.token_itemsize
    return int(rec["tokens_offset"]) + size + (-size) % _BLOCK


def _columns_intact(buf: memoryview, index: RowIndex, row: int) -> bool:
    try:
        row_columns(buf, index, row)
    except ValueError:
        return False
    return True


def verify_shard(name: str, tar: bytes | memoryview, idx: bytes | memoryview, report: VerifyReport) -> None:
    """Check one shard's bytes (see the module doc); problems go into ``report``."""
    report.shards += 1
    report.bytes += len(tar)
    try:
        index = decode_index(idx, name)
    except CorruptIndexError as exc:
        report.problems.append(Problem(name, f"index unusable: {exc}"))
        return
    buf = memoryview(tar)
    report.rows += index.rows
    full = bool(index.flags & FLAG_SAMPLE_CHECKSUMS)
    if not full:
        report.unchecked_members += 1
    start = 0
    for row in range(index.rows):
        rec = index.records[row]
        end = _sample_end(index, row)
        if end > len(buf) or end <= start:
            report.problems.append(Problem(name, f"sample bytes [{start}, {end}) outside the tar", row))
            start = max(start, end)
            continue
        tokens_at = int(rec["tokens_offset"])
        tokens = buf[tokens_at : tokens_at + int(rec["n_tokens"]) * index.token_itemsize]
        doc_start = int(rec["doc_start"])
        doclens = index.doclens[doc_start : doc_start + int(rec["n_docs"])]
        if full and sample_checksum32(buf[start:end]) != int(rec["sample_checksum"]):
            report.problems.append(
                Problem(name, "sample bytes (headers, .doclens, .json, .tokens) changed", row)
            )
        elif row_checksum(tokens) != int(rec["tokens_checksum"]):
            report.problems.append(Problem(name, "tokens changed", row))
        elif row_checksum(np.ascontiguousarray(doclens).tobytes()) != int(rec["doclens_checksum"]):
            report.problems.append(Problem(name, "document lengths changed", row))
        elif index.column_records is not None and not _columns_intact(buf, index, row):
            report.problems.append(Problem(name, "per-token columns changed", row))
        start = end
    trailer = buf[start:]
    if len(trailer) < 2 * _BLOCK or any(trailer):
        report.problems.append(Problem(name, f"tar end is not {2 * _BLOCK} zero bytes after the last sample"))


def verify_dataset(manifest: Any, storage_options: dict[str, Any] | None = None) -> VerifyReport:
    """Check every byte of a release of any kind (its manifest, or the manifest's path / URI / folder) with the
    verifier :mod:`fm_loader.kinds` registers for its kind. Missing or unreadable files are reported, not raised.
    """
    from fm_loader.kinds import KINDS, read_manifest

    if not isinstance(manifest, (DatasetManifest, MediaManifest)):
        manifest = read_manifest(str(manifest), storage_options)
    return KINDS[manifest.kind].verifier()(manifest, storage_options)


def verify_token_dataset(
    manifest: DatasetManifest, storage_options: dict[str, Any] | None = None
) -> VerifyReport:
    """Check every shard of a packed-token manifest: presence, size and sha256 against the manifest, then
    :func:`verify_shard`."""
    report = VerifyReport()
    for entry in manifest.shards:
        try:
            tar = read_bytes(manifest.shard_uri(entry), storage_options)
            idx = read_bytes(manifest.index_uri(entry), storage_options)
        except OSError as exc:
            report.problems.append(Problem(entry.path, f"missing or unreadable: {exc}"))
            continue
        if entry.bytes and len(tar) != entry.bytes:
            report.problems.append(Problem(entry.path, f"{len(tar)} bytes, the manifest says {entry.bytes}"))
        if hashlib.sha256(tar).hexdigest() != entry.sha256:
            report.problems.append(Problem(entry.path, "sha256 differs from the manifest"))
        if entry.index_sha256 and hashlib.sha256(idx).hexdigest() != entry.index_sha256:
            report.problems.append(
                Problem(entry.resolved_index_path, "index sha256 differs from the manifest")
            )
        verify_shard(entry.path, tar, idx, report)
    return report
