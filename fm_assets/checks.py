"""Asset checks shared by every stage (accounting, schema) and the stage-specific ones.

A check is a plain function of the stage's committed output, so the same checks run inside the
Dagster asset (as ``AssetCheckResult``s) and from the audit report.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.refs import read_success
from fm_resources.object_store import ObjectStore


@dataclass
class CheckOutcome:
    passed: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    description: str = ""


CheckFn = Callable[[ObjectStore, dict[str, Any], Any], CheckOutcome]  # (store, success, stage) -> outcome


@dataclass(frozen=True)
class StageCheck:
    name: str
    description: str
    fn: CheckFn
    blocking: bool = True
    warn_only: bool = False  # a failure is a WARN, not an ERROR


def schema_fingerprint(schema: pa.Schema) -> str:
    # Parquet renames list children ("item" -> "element") on the way to disk; the child name carries no meaning.
    text = ",".join(f"{f.name}:{re.sub(r'<(item|element): ', '<', str(f.type))}" for f in schema)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_accounting(store: ObjectStore, success: dict[str, Any], stage: Any) -> CheckOutcome:
    counts = success["counts"]
    balanced = counts["records_in"] == counts["records_out"] + counts["records_rejected"]
    rejects_kept = 0
    for rel in success["rejects"]:
        with store.open(rel) as handle:
            rejects_kept += pq.ParquetFile(handle).metadata.num_rows
    meta: dict[str, Any] = {**counts, "rejects_kept": rejects_kept}
    continuous = True
    if stage.upstream is not None:
        upstream = read_success(store, stage.upstream, success["batch"])
        meta["upstream_rows_written"] = upstream["counts"]["rows_written"]
        continuous = counts["records_in"] == upstream["counts"]["rows_written"]
    passed = balanced and rejects_kept == counts["records_rejected"] and continuous
    return CheckOutcome(passed, meta, "records_in == records_out + records_rejected; every reject kept; nothing lost between stages")


def check_schema(store: ObjectStore, success: dict[str, Any], stage: Any) -> CheckOutcome:
    expected = schema_fingerprint(stage.output_schema)
    wrong = []
    for rel in success["parts"]:
        with store.open(rel) as handle:
            found = schema_fingerprint(pq.ParquetFile(handle).schema_arrow)
        if found != expected:
            wrong.append(rel)
    return CheckOutcome(not wrong, {"expected_fingerprint": expected, "mismatched_parts": len(wrong)}, "output schema fingerprint")


COMMON_CHECKS = (
    StageCheck("accounting", "records_in == records_out + records_rejected, rejects kept, continuity", check_accounting),
    StageCheck("schema_fingerprint", "every output part has the stage's declared schema", check_schema),
)
