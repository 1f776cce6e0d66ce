"""land: copy raw files into the content-addressed store and parse them into document records.

One work unit per landed file. The raw bytes go to ``cas/<h[:2]>/<h>`` (write-once); a file whose
bytes are already there (from this or an earlier batch) is recorded as an exact duplicate at ingest.
Unparseable input (invalid UTF-8, truncated archives, malformed JSON, ...) is quarantined here.
"""

from __future__ import annotations

from typing import Any

from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_file
from fm_assets.engine.landing import BatchManifest, read_batch_manifest
from fm_assets.engine.schemas import make_doc_id
from fm_assets.engine.stage import SideInputs, Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.transforms.readers import RawReject, iter_raw_records


class LandStage(Stage):
    name = "land"
    code_version = "land-v1"
    upstream = None
    description = "Raw files -> content-addressed store -> parsed document records (bad input quarantined)."

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"rows_per_part": ctx.settings.land_rows_per_part}

    def rows_per_file(self, ctx: StageContext) -> int | None:
        return ctx.settings.land_rows_per_part

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        manifest = read_batch_manifest(ctx.store, ctx.batch)
        return SideInputs({"landing": manifest.data_version}, manifest)

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        manifest: BatchManifest = ctx.side.data
        return [
            WorkUnit(f"f{index:05d}", (layout.landed_file(ctx.batch, entry["path"]),))
            for index, entry in enumerate(sorted(manifest.files, key=lambda f: f["path"]))
        ]

    def process(self, unit: UnitContext) -> UnitResult:
        ctx = unit.partition
        manifest: BatchManifest = ctx.side.data
        raw_rel = unit.unit.inputs[0]
        rel_in_batch = layout.landed_rel_in_batch(raw_rel)
        entry = next(f for f in manifest.files if f["path"] == rel_in_batch)
        sha = entry["sha256"]
        already_in_cas = ctx.store.exists(layout.cas_object(sha))
        records_in = 0
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
                return UnitResult(records_in=1, extra={"bytes_in": entry["bytes"], "files": 1})
            if not already_in_cas:
                ctx.store.put_file(local, layout.cas_object(sha))
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
        return UnitResult(
            records_in=records_in,
            extra={"bytes_in": entry["bytes"], "cas_duplicate_files": int(already_in_cas), "files": 1},
        )


STAGE = LandStage()
