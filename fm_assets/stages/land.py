"""land: copy raw files into the content-addressed store and parse them into document records.

Landed files are grouped into work units of about ``land_unit_bytes`` (path order); output parts roll over
every ``land_part_bytes`` of text, which sets the unit size of every later stage. The raw bytes go to
``cas/<h[:2]>/<h>`` (write-once); a file whose bytes are already there (from this or an earlier batch) is
recorded as an exact duplicate at ingest, after re-verifying the stored copy (a damaged one is replaced).
Unparseable input (invalid UTF-8, truncated archives, malformed JSON, ...) is quarantined here. A record's own
``id`` and licence are kept as ``source_id`` and ``record_license``; a record whose licence is not the batch's
is quarantined (``license_conflict``, ``transforms.readers.provenance``), never relabelled.

Files the media chain reads (images, audio, their caption/transcript companions, tars, ``*.media.jsonl``:
``transforms.readers.media_samples.media_claims``) are not documents: land counts them (``media_files``) and
lists them with what they are in its unit markers, and ``media_land`` takes them into the CAS.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from fm_assets.compliance.namespaces import require_processable
from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_file
from fm_assets.engine.landing import BatchManifest, read_batch_manifest
from fm_assets.engine.schemas import make_doc_id
from fm_assets.engine.stage import SideInputs, Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.readers import RawReject, iter_raw_records
from fm_assets.transforms.readers.media_samples import media_claims
from fm_assets.transforms.readers.provenance import LICENSE_CONFLICT, record_provenance

log = logging.getLogger(__name__)


class LandStage(Stage):
    name = "land"
    code_version = "land-v4"  # v4: records keep source_id / record_license
    upstream = None
    description = "Raw files -> content-addressed store -> parsed document records (bad input quarantined)."

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "rows_per_part": ctx.settings.land_rows_per_part,
            "unit_bytes": ctx.settings.land_unit_bytes,
            "part_bytes": ctx.settings.land_part_bytes,
        }

    def rows_per_file(self, ctx: StageContext) -> int | None:
        return ctx.settings.land_rows_per_part

    def bytes_per_file(self, ctx: StageContext) -> int | None:
        return ctx.settings.land_part_bytes

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        manifest = read_batch_manifest(ctx.store, ctx.batch)
        # an unreviewed or rejected quarantine batch stops here, before anything is written
        namespace = require_processable(ctx.store, ctx.batch)
        # the manifest's own hash too: its licence/namespace go into every record
        versions = {"landing": manifest.data_version, "manifest": manifest.sha256}
        if namespace.decision_sha256:  # a promotion changes the namespace every record carries
            versions["promotion"] = namespace.decision_sha256
        return SideInputs(versions, replace(manifest, namespace=namespace.name or manifest.namespace))

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        """Files in path order, grouped into units of about ``land_unit_bytes``: the unit count follows bytes,
        so 5,000 tiny files cost about what one file of the same bytes does."""
        manifest: BatchManifest = ctx.side.data
        units: list[WorkUnit] = []
        group: list[str] = []
        group_bytes = 0
        for entry in sorted(manifest.files, key=lambda f: f["path"]):
            group.append(layout.landed_file(ctx.batch, entry["path"]))
            group_bytes += entry["bytes"]
            if group_bytes >= ctx.settings.land_unit_bytes:
                units.append(WorkUnit(f"g{len(units):05d}", tuple(group)))
                group, group_bytes = [], 0
        if group:
            units.append(WorkUnit(f"g{len(units):05d}", tuple(group)))
        return units

    def prepare(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> dict[str, str]:
        """The batch's media files (path -> what they are): a caption's media file may sit in another unit."""
        manifest: BatchManifest = ctx.side.data
        return media_claims(entry["path"] for entry in manifest.files)

    def process(self, unit: UnitContext) -> UnitResult:
        by_path = {entry["path"]: entry for entry in unit.partition.side.data.files}
        claims: dict[str, str] = unit.prepared or {}
        records_in = 0
        extra: dict[str, Any] = {"bytes_in": 0, "files": 0, "cas_duplicate_files": 0, "cas_repaired_files": 0}
        media: list[dict[str, str]] = []
        for raw_rel in unit.unit.inputs:
            entry = by_path[layout.landed_rel_in_batch(raw_rel)]
            if entry["path"] in claims:  # read by media_land, not a document
                media.append({"path": entry["path"], "as": claims[entry["path"]]})
                continue
            records_in += self._land_file(unit, raw_rel, entry, extra)
            extra["bytes_in"] += entry["bytes"]
            extra["files"] += 1
        extra["media_files"] = len(media)
        if media:
            extra["media_claimed"] = media
        return UnitResult(records_in=records_in, extra=extra)

    def _land_file(
        self, unit: UnitContext, raw_rel: str, entry: dict[str, Any], extra: dict[str, Any]
    ) -> int:
        """Copy one landed file into the CAS and parse it; returns its records in."""
        ctx = unit.partition
        manifest: BatchManifest = ctx.side.data
        rel_in_batch, sha = entry["path"], entry["sha256"]
        with ctx.store.local_copy(raw_rel) as local:
            actual = sha256_file(local)
            if actual != sha:  # the landed bytes are not what _batch.json promised: quarantine the file
                unit.reject(
                    None,
                    "checksum_mismatch",
                    {"file": rel_in_batch, "expected_sha256": sha, "actual_sha256": actual},
                    cas_hash=actual,
                    record_index=-1,
                    text="",
                )
                return 1
            stored = put_in_cas(ctx.store, local, sha, ctx.batch)
            if stored != "stored":
                extra[f"cas_{stored}_files"] += 1
            records_in = 0
            for item in iter_raw_records(local):
                records_in += 1
                if isinstance(item, RawReject):
                    unit.reject(
                        None,
                        item.reason,
                        {**item.details, "file": rel_in_batch},
                        cas_hash=sha,
                        record_index=item.record_index,
                        text=item.raw_prefix,
                    )
                    continue
                provenance = record_provenance(item.meta, manifest.license)
                record = {
                    "doc_id": make_doc_id(sha, item.record_index),
                    "batch": ctx.batch,
                    "source": manifest.source,
                    "license": manifest.license,
                    "namespace": manifest.namespace,
                    "cas_hash": sha,
                    "record_index": item.record_index,
                    "url": item.url or f"cas://{sha}#{item.record_index}",
                    "text": item.text or "",
                    "lang": None,
                    "lang_score": None,
                    "quality_score": None,
                    "pii_flags": None,
                    "source_id": provenance.source_id,
                    "record_license": provenance.record_license,
                }
                if provenance.conflict is not None:  # never relabelled with the batch's licence: quarantined
                    details = {**provenance.conflict, "source_id": provenance.source_id, "file": rel_in_batch}
                    unit.reject(record, LICENSE_CONFLICT, details)
                    continue
                unit.write(record)
        return records_in


def put_in_cas(store: ObjectStore, local: Path, sha: str, batch: str) -> str:
    """Write-once by content; an object already there is re-verified, and replaced if it was damaged.

    Returns what happened: ``stored``, ``duplicate`` (already there and intact) or ``repaired``."""
    rel = layout.cas_object(sha)
    outcome = "stored"
    if store.exists(rel):
        with store.local_copy(rel) as existing:
            if sha256_file(existing) == sha:
                return "duplicate"
        log.warning("CAS object %s was damaged; restored from batch %s", rel, batch)
        outcome = "repaired"
    store.put_file(local, rel)
    return outcome


STAGE = LandStage()
