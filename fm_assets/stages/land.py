"""land: copy raw files into the content-addressed store and parse them into document records.

Landed files are grouped into work units of about ``land_unit_bytes`` (path order); output parts roll over
every ``land_part_bytes`` of text, which sets the unit size of every later stage. The raw bytes go to
``cas/<h[:2]>/<h>`` (write-once); a file whose bytes are already there (from this or an earlier batch) is
recorded as an exact duplicate at ingest, after re-verifying the stored copy (a damaged one is replaced).
Unparseable input (invalid UTF-8, truncated archives, malformed JSON, ...) is quarantined here.
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
from fm_assets.transforms.readers import RawReject, iter_raw_records

log = logging.getLogger(__name__)


class LandStage(Stage):
    name = "land"
    code_version = "land-v2"
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

    def process(self, unit: UnitContext) -> UnitResult:
        by_path = {entry["path"]: entry for entry in unit.partition.side.data.files}
        records_in = 0
        extra = {"bytes_in": 0, "files": 0, "cas_duplicate_files": 0, "cas_repaired_files": 0}
        for raw_rel in unit.unit.inputs:
            entry = by_path[layout.landed_rel_in_batch(raw_rel)]
            records_in += self._land_file(unit, raw_rel, entry, extra)
            extra["bytes_in"] += entry["bytes"]
            extra["files"] += 1
        return UnitResult(records_in=records_in, extra=extra)

    def _land_file(
        self, unit: UnitContext, raw_rel: str, entry: dict[str, Any], extra: dict[str, int]
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
            self._put_in_cas(ctx, local, sha, extra)
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
                unit.write(
                    {
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
                    }
                )
        return records_in

    @staticmethod
    def _put_in_cas(ctx: StageContext, local: Path, sha: str, extra: dict[str, int]) -> None:
        """Write-once by content; an object already there is re-verified, and replaced if it was damaged."""
        rel = layout.cas_object(sha)
        if ctx.store.exists(rel):
            with ctx.store.local_copy(rel) as existing:
                if sha256_file(existing) == sha:
                    extra["cas_duplicate_files"] += 1
                    return
            log.warning("CAS object %s was damaged; restored from batch %s", rel, ctx.batch)
            extra["cas_repaired_files"] += 1
        ctx.store.put_file(local, rel)


STAGE = LandStage()
