"""Per-batch, per-stage accounting read back from refs and ``_SUCCESS.json`` files (the ``fm report`` data)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq

from fm_assets.landing import list_complete_batches
from fm_assets.pipeline import STAGE_NAMES
from fm_assets.refs import read_ref
from fm_resources.object_store import ObjectStore


def stage_report(store: ObjectStore, batch: str, stage: str) -> dict[str, Any] | None:
    ref = read_ref(store, stage, batch)
    if ref is None:
        return None
    success = store.read_json(f"{ref['prefix']}/_SUCCESS.json")
    counts = success["counts"]
    extra = success["extra"]
    artifacts = success.get("artifacts", {})
    return {
        "batch": batch,
        "stage": stage,
        "records_in": counts["records_in"],
        "records_out": counts["records_out"],
        "records_rejected": counts["records_rejected"],
        "rejects_by_reason": success["rejects_by_reason"],
        "bytes_in": extra.get("bytes_in"),
        "bytes_out": counts.get("bytes_out"),
        "tokens": extra.get("tokens"),
        "packing_efficiency": artifacts.get("packing_efficiency") if stage in ("pack", "shard") else None,
        "data_version": success["data_version"],
        "key": success["key"],
        "cache_hit": ref.get("last_cache_hit"),
        "wall_seconds": ref.get("last_wall_seconds"),
        "compute_seconds": success["seconds"],
    }


def build_report(store: ObjectStore, batches: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    for batch in batches or list_complete_batches(store):
        for stage in STAGE_NAMES:
            row = stage_report(store, batch, stage)
            if row is not None:
                rows.append(row)
    return rows


def iter_rejects(store: ObjectStore, batch: str, stage: str | None = None) -> Iterator[dict[str, Any]]:
    """Every rejected record of ``batch`` (optionally one stage) with stage, reason and details."""
    for name in [stage] if stage else STAGE_NAMES:
        ref = read_ref(store, name, batch)
        if ref is None:
            continue
        success = store.read_json(f"{ref['prefix']}/_SUCCESS.json")
        for rel in success["rejects"]:
            with store.open(rel) as handle:
                for record_batch in pq.ParquetFile(handle).iter_batches(batch_size=1024):
                    for row in record_batch.to_pylist():
                        row["details"] = json.loads(row["details"]) if row["details"] else {}
                        yield row
