"""Verify media shards byte for byte, as :mod:`fm_loader.verify` does for text shards (same report type).

``verify_media_dataset(manifest)`` checks every shard's tar and index against the manifest's size and sha256,
the index footer, every sample's bytes (all members with their tar headers) against its checksum, that the
samples tile the tar with nothing between them, and the end-of-archive blocks; it reports every problem found,
each naming the shard and, for a sample, its index and key.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fm_loader.format import sample_checksum32
from fm_loader.media.format import decode_media_index
from fm_loader.media.manifest import MediaManifest
from fm_loader.storage import read_bytes
from fm_loader.verify import Problem, VerifyReport

_END_OF_ARCHIVE = b"\0" * 1024


def verify_media_shard(name: str, tar: bytes, idx: bytes, report: VerifyReport) -> None:
    """Check one shard's samples against its index; problems are appended to ``report``."""
    try:
        index = decode_media_index(idx, name)
    except ValueError as exc:
        report.problems.append(Problem(name, str(exc)))
        return
    expected_start = 0
    for row, rec in enumerate(index.records):
        start, size = int(rec["sample_offset"]), int(rec["sample_size"])
        if start != expected_start:
            report.problems.append(
                Problem(name, f"sample {index.key(row)} does not follow the previous one", row)
            )
        if sample_checksum32(tar[start : start + size]) != int(rec["checksum"]):
            report.problems.append(Problem(name, f"sample {index.key(row)}: checksum mismatch", row))
        expected_start = start + size
    if tar[expected_start:] != _END_OF_ARCHIVE:
        report.problems.append(Problem(name, "tar does not end with exactly the two end-of-archive blocks"))
    report.shards += 1
    report.rows += index.samples
    report.bytes += len(tar)


def verify_media_dataset(
    manifest: MediaManifest | str, storage_options: dict[str, Any] | None = None
) -> VerifyReport:
    """Verify every shard of a media manifest (a :class:`MediaManifest` or its path / URI).

    Returns:
        A :class:`fm_loader.verify.VerifyReport`; ``rows`` counts samples.
    """
    if not isinstance(manifest, MediaManifest):
        manifest = MediaManifest.load(str(manifest), storage_options)
    report = VerifyReport()
    for entry in manifest.shards:
        label = manifest.shard_uri(entry)
        files = {}
        for kind, uri, sha in (
            ("tar", label, entry.sha256),
            ("index", manifest.index_uri(entry), entry.index_sha256),
        ):
            try:
                data = read_bytes(uri, storage_options)
            except OSError as exc:
                report.problems.append(
                    Problem(label, f"{kind} {uri} unreadable ({type(exc).__name__}: {exc})")
                )
                continue
            if hashlib.sha256(data).hexdigest() != sha:
                report.problems.append(Problem(label, f"{kind} {uri} sha256 differs from the manifest"))
            files[kind] = data
        if len(files) == 2:
            verify_media_shard(label, files["tar"], files["index"], report)
    return report
