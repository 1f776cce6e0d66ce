"""From a training step back to the raw bytes and their licence (``fm trace``).

``locate`` turns (manifest, global step, rank, row) into a shard row with the loader's own position math and
no data read: a ``fm_loader.Loader`` over the manifest (a revoked one too) gives the global stream; packed
tokens map step ``S`` to epoch ``S // ceil(E / G)`` and position ``(S mod ceil(E / G)) * G + rank * G / W +
row``, media take the ``S``-th planned batch (sample indexes only). A loader ``sample_id`` decodes to its
shard row directly. ``documents_in_row`` reads the doc ids of that row from the shard stage's row table, and
``provenance`` follows each doc id to its landed record (batch, source, licence, namespace, CAS hash, landed
file and record index), what every stage of its chain did with it (kept, or rejected with the reason) and the
dataset versions that hold it.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from fm_assets.compliance import blast_radius
from fm_assets.engine import layout
from fm_assets.engine.landing import read_batch_manifest
from fm_assets.engine.refs import read_ref, read_success, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import CHAIN_NAMES, MEDIA, TEXT
from fm_loader.kinds import read_manifest
from fm_loader.manifest import DatasetManifest
from fm_loader.manifest_base import Manifest

LAND = {TEXT: "land", MEDIA: "media_land"}
ROW_STAGES = ("pack", "shard", "media_shard")  # their outputs are rows (packed documents), not documents
ROW_TABLE = {TEXT: ("row_in_shard", "doc_ids"), MEDIA: ("sample_in_shard", "doc_id")}  # position, ids


class TraceError(ValueError):
    """A trace request that cannot be answered; the message says why."""


@dataclass(frozen=True)
class ShardRow:
    """One row (packed tokens) or sample (media) of a release, located from the stream."""

    manifest: Manifest
    shard: int  # index in the manifest's shard list
    row: int  # row (sample) inside that shard
    epoch: int | None = None
    position: int | None = None  # global stream position inside the epoch

    @property
    def chain(self) -> str:
        return TEXT if isinstance(self.manifest, DatasetManifest) else MEDIA


def locate(
    manifest_uri: str,
    *,
    step: int,
    rank: int,
    row: int,
    global_batch_size: int,
    world_size: int,
    seed: int,
    storage_options: dict[str, Any] | None = None,
) -> ShardRow:
    """The shard row that row ``row`` of rank ``rank``'s batch at global step ``step`` held."""
    from fm_loader import Loader

    if step < 0 or row < 0:
        raise TraceError("--step and --row count from 0")
    local = global_batch_size // max(world_size, 1)
    if not 0 <= row < local:
        raise TraceError(f"--row {row} is outside a rank's batch of {local} rows")
    manifest = read_manifest(manifest_uri, storage_options)  # parsed once: the loader takes the object
    loader = Loader(
        manifest,
        global_batch_size=global_batch_size,
        world_size=world_size,
        rank=rank,
        seed=seed,
        epochs=None,
        allow_revoked=True,
        allowed_namespaces=(manifest.namespace,),
        storage_options=storage_options,
    )
    try:
        if isinstance(manifest, DatasetManifest):
            per_epoch = -(-loader.epoch_rows // global_batch_size)
            epoch, k = divmod(step, per_epoch)
            position = k * global_batch_size + rank * local + row
            if position >= loader.epoch_rows:
                raise TraceError(
                    f"step {step} rank {rank} row {row} is padding past the end of epoch {epoch}"
                )
            refs = loader.stream.rows(epoch, position, 1)
            return ShardRow(manifest, int(refs.shard[0]), int(refs.row[0]), epoch, position)
        from fm_loader.media.plan import POSITION, ROW, SHARD, SOURCE

        planned = next(islice(loader.steps(0, (0, 0), None), step, None))
        ref = planned.work.refs[row]
        if int(ref[SOURCE]) < 0:
            raise TraceError(f"step {step} rank {rank} row {row} is padding (no sample)")
        return ShardRow(manifest, int(ref[SHARD]), int(ref[ROW]), planned.epoch, int(ref[POSITION]))
    finally:
        loader.close()


def locate_sample_id(
    manifest_uri: str, sample_id: int, storage_options: dict[str, Any] | None = None
) -> ShardRow:
    """The shard row of a loader ``sample_ids`` value (one source: ``shard offset + row``)."""
    from fm_loader.batching import (
        SOURCE_SHIFT,
    )  # fm_loader.batching imports torch: not with every `fm` command

    manifest = read_manifest(manifest_uri, storage_options)
    source, local = sample_id >> SOURCE_SHIFT, sample_id & ((1 << SOURCE_SHIFT) - 1)
    if sample_id < 0 or source != 0:
        raise TraceError(
            f"sample id {sample_id} is not a row of this one manifest (padding, or another source)"
        )
    rows = np.array([entry.rows if hasattr(entry, "rows") else entry.samples for entry in manifest.shards])
    offsets = np.concatenate([[0], np.cumsum(rows)])
    if local >= offsets[-1]:
        raise TraceError(f"sample id {sample_id} is past the manifest's {int(offsets[-1])} rows")
    shard = int(np.searchsorted(offsets, local, side="right") - 1)
    return ShardRow(manifest, shard, int(local - offsets[shard]))


def _store_rel(store: ObjectStore, uri: str) -> str:
    root = store.root.rstrip("/") + "/"
    path = uri.removeprefix("file://")
    if not path.startswith(root):
        raise TraceError(f"shard {uri} is not under the storage root {store.root} (pass that root as --root)")
    return layout.normalize_path(path[len(root) :])


def documents_in_row(store: ObjectStore, located: ShardRow) -> tuple[str, str, list[str]]:
    """(shard path relative to the root, the batch whose shard stage wrote it, the doc ids in that row in row
    order)."""
    manifest = located.manifest
    shard_rel = _store_rel(store, manifest.shard_uri(manifest.shards[located.shard]))
    prefix, name = posixpath.split(shard_rel)
    position, column = ROW_TABLE[located.chain]
    ids: list[str] = []
    success = read_success_at(store, prefix)
    for part in success.parts:
        with store.open(part) as handle:
            hit = pq.read_table(
                handle, columns=[column], filters=[("shard", "=", name), (position, "=", located.row)]
            )
        for value in hit[column].to_pylist():
            ids.extend([value] if isinstance(value, str) else value or [])
    if not ids:
        raise TraceError(f"row {located.row} of {shard_rel} is not in its shard stage's row table")
    return shard_rel, success.batch, ids


def _rows_with(store: ObjectStore, parts: list[str], doc_id: str) -> list[dict[str, Any]]:
    found = []
    for part in parts:
        with store.open(part) as handle:
            file = pq.ParquetFile(handle)
            names = [n for n in file.schema_arrow.names if n not in ("text", "norm_data")]
            table = pq.read_table(handle, columns=names, filters=[("doc_id", "=", doc_id)])
        found += table.to_pylist()
    return found


def stage_outcomes(store: ObjectStore, chain: str, batch: str, doc_id: str) -> list[dict[str, Any]]:
    """What each stage of ``chain`` (current outputs) did with ``doc_id``: kept, rejected (reason), or absent
    (never reached it, or not a record stage: pack and shard hold rows, not documents)."""
    outcomes = []
    for stage in CHAIN_NAMES[chain]:
        if read_ref(store, stage, batch) is None:
            outcomes.append({"stage": stage, "outcome": "not run"})
            continue
        success = read_success(store, stage, batch)
        rejected = _rows_with(store, list(success.rejects), doc_id)
        if rejected:
            outcomes.append({"stage": stage, "outcome": "rejected", "reason": rejected[0].get("reason")})
        elif stage in ROW_STAGES:  # rows, not documents: they hold it when no stage before dropped it
            dropped = any(o["outcome"] in ("rejected", "absent") for o in outcomes)
            outcomes.append({"stage": stage, "outcome": "absent" if dropped else "kept"})
        elif _rows_with(store, list(success.parts), doc_id):
            outcomes.append({"stage": stage, "outcome": "kept"})
        else:
            outcomes.append({"stage": stage, "outcome": "absent"})
    return outcomes


def provenance(
    store: ObjectStore, doc_id: str, batch: str | None = None, chain: str | None = None
) -> dict[str, Any]:
    """Where ``doc_id`` (a document or media sample id; a packed piece ``<id>@<offset>`` is its document)
    came from: its landed record, the stages' outcomes and the dataset versions holding it. ``batch`` (known
    from the shard that held it) saves the search over every landed batch."""
    base = blast_radius.base_doc_id(doc_id)
    record, found_chain = None, None
    for candidate_batch in [batch] if batch else _candidate_batches(store, base):
        for candidate in [chain] if chain else [TEXT, MEDIA]:
            if read_ref(store, LAND[candidate], candidate_batch) is None:
                continue
            rows = _rows_with(store, list(read_success(store, LAND[candidate], candidate_batch).parts), base)
            if rows:
                record, found_chain = rows[0], candidate
                break
        if record:
            break
    if record is None or found_chain is None:
        raise TraceError(f"doc id {base} is in no landed batch's land output")
    manifest = read_batch_manifest(store, record["batch"])
    paths = [f["path"] for f in manifest.files if f.get("sha256") == record["cas_hash"]]
    origin = record.get("origin") or (paths[0] if paths else "")
    landed = layout.landed_file(record["batch"], origin.split("#", 1)[0]) if origin else None
    releases = blast_radius.locate_in_releases(
        store, blast_radius.AffectedDocuments({base}, [record["batch"]])
    )
    return {
        "doc_id": doc_id,
        "document": base,
        "chain": found_chain,
        "batch": record["batch"],
        "source": record["source"],
        "license": record["license"],
        "namespace": record["namespace"],
        "cas_hash": record["cas_hash"],
        "landed_file": landed,
        "origin": origin,
        "record_index": record["record_index"],
        "line": record["record_index"] + 1
        if found_chain == TEXT and landed and _is_jsonl(store, landed)
        else None,
        "stages": stage_outcomes(store, found_chain, record["batch"], base),
        "dataset_versions": [
            {"dataset": r["dataset"], "version": r["version"], "revoked": bool(r["already_revoked"])}
            for r in releases
        ],
    }


def _is_jsonl(store: ObjectStore, landed_file: str) -> bool:
    """Whether the landed file is read as JSON lines (plain or compressed; by name and magic number, as the
    land stage detects it): its record index is then the 0-based line number."""
    from fm_assets.transforms.readers.detect import HEAD_BYTES, JSONL, JSONL_GZ, JSONL_ZST, detect_format

    with store.open(landed_file) as handle:
        head = handle.read(HEAD_BYTES)
    return detect_format(landed_file, head) in (JSONL, JSONL_GZ, JSONL_ZST)


def _candidate_batches(store: ObjectStore, doc_id: str) -> list[str]:
    """The landed batches to look for ``doc_id`` in: first those holding a file whose sha256 starts with the
    id's prefix (a text doc id starts with its landed file's hash), then every other one (a media sample id
    hashes its file and path)."""
    from fm_assets.engine.landing import list_complete_batches

    prefix = doc_id.split(":", 1)[0]
    batches = list_complete_batches(store)
    first = [
        b
        for b in batches
        if any(f.get("sha256", "").startswith(prefix) for f in read_batch_manifest(store, b).files)
    ]
    return first + [b for b in batches if b not in first]
