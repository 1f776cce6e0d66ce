"""Asset checks shared by every stage (accounting, schema), the type of stage-specific ones, and their
stored outcomes.

A check is a plain function of the stage's committed output, so the same checks run inside the Dagster
asset (as ``AssetCheckResult``s) and from the audit report. Outputs are immutable, so outcomes are stored
next to them (``_checks.json``) and a cache hit re-reports them instead of re-reading every file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_bytes
from fm_assets.engine.pool import map_on_workers, metered_spread
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import read_success
from fm_assets.engine.stage import UnitContext, UnitResult
from fm_assets.engine.store import ObjectStore


@dataclass
class CheckOutcome:
    passed: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    description: str = ""


CheckFn = Callable[[ObjectStore, StageSuccess, Any], CheckOutcome]  # (store, success, stage) -> outcome
# (the unit, what it reported, its written part files) -> findings; see StageCheck.in_unit
UnitCheckFn = Callable[[UnitContext, UnitResult, list[Path]], dict[str, Any]]


@dataclass(frozen=True)
class StageCheck:
    name: str
    description: str
    fn: CheckFn
    blocking: bool = True
    warn_only: bool = False  # a failure is a WARN, not an ERROR
    # the check's per-unit part, run inside each unit once its part files are written (the files whose
    # sha256 the unit commits), so a sample is re-read while the unit's inputs and side data are at hand and
    # the work spreads with the units; ``fn`` then judges ``success.unit_checks[name]``
    in_unit: UnitCheckFn | None = None


def schema_fingerprint(schema: pa.Schema) -> str:
    # Parquet renames list children ("item" -> "element") on the way to disk; the child name carries no meaning.
    text = ",".join(f"{f.name}:{re.sub(r'<(item|element): ', '<', str(f.type))}" for f in schema)
    return sha256_bytes(text.encode())[:16]


def check_accounting(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    counts = success.counts
    rejects_kept = 0
    for rel in success.rejects:
        with store.open(rel) as handle:
            rejects_kept += pq.ParquetFile(handle).metadata.num_rows
    meta: dict[str, Any] = {**counts.to_json(), "rejects_kept": rejects_kept}
    continuous = True
    if stage.upstream is not None:
        upstream = read_success(store, stage.upstream, success.batch)
        meta["upstream_rows_written"] = upstream.counts.rows_written
        continuous = counts.records_in == upstream.counts.rows_written
    passed = counts.balanced and rejects_kept == counts.records_rejected and continuous
    return CheckOutcome(
        passed,
        meta,
        "records_in == records_out + records_rejected; every reject kept; nothing lost between stages",
    )


def check_schema(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    expected = schema_fingerprint(stage.output_schema)
    wrong = []
    for rel in success.parts:
        with store.open(rel) as handle:
            found = schema_fingerprint(pq.ParquetFile(handle).schema_arrow)
        if found != expected:
            wrong.append(rel)
    return CheckOutcome(
        not wrong,
        {"expected_fingerprint": expected, "mismatched_parts": len(wrong)},
        "output schema fingerprint",
    )


COMMON_CHECKS = (
    StageCheck(
        "accounting",
        "records_in == records_out + records_rejected, rejects kept, continuity",
        check_accounting,
    ),
    StageCheck("schema_fingerprint", "every output part has the stage's declared schema", check_schema),
)


def _stored_sha256(task: tuple[ObjectStore, str]) -> str:
    store, rel = task
    return store.sha256(rel)


def stored_digests(store: ObjectStore, rels: list[str]) -> list[str]:
    """The sha256 of each stored file, in order, re-read and hashed on the stage's workers (``pool.map_on_workers``:
    in this process outside ``spread_over``): what the shard checks compare with their manifests."""
    return map_on_workers(_stored_sha256, [(store, rel) for rel in rels])


def stage_checks(stage: Any) -> tuple[StageCheck, ...]:
    return (*COMMON_CHECKS, *stage.checks)


def unit_findings(success: StageSuccess, check: str) -> tuple[list[dict[str, Any]], int]:
    """(the findings of every unit that ran ``check``'s in-unit part, how many units have none)."""
    found = success.unit_checks.get(check, [])
    present = [finding for finding in found if finding is not None]
    return present, len(success.units) - len(present)


def run_in_unit_checks(
    stage: Any, unit: UnitContext, result: UnitResult, written: list[Path]
) -> dict[str, Any]:
    """Every in-unit check part of ``stage`` over one unit's written parts: check name -> findings."""
    return {
        check.name: check.in_unit(unit, result, written)
        for check in stage.checks
        if check.in_unit is not None
    }


def read_check_outcomes(store: ObjectStore, prefix: str) -> dict[str, CheckOutcome]:
    rel = layout.check_outcomes(prefix)
    stored = store.read_json(rel) if store.exists(rel) else {}
    return {name: CheckOutcome(**outcome) for name, outcome in stored.items()}


def evaluate_checks(stage: Any, store: ObjectStore, success: StageSuccess) -> dict[str, CheckOutcome]:
    """Every check's outcome for an output folder; only checks not stored yet are evaluated (then stored,
    with what they cost in ``_checks_cost.json``: each one's wall, and the tasks it spread over the stage's
    workers and their seconds)."""
    stored = read_check_outcomes(store, success.prefix)
    outcomes: dict[str, CheckOutcome] = {}
    costs: dict[str, dict[str, float | int]] = {}
    for check in stage_checks(stage):
        if check.name in stored:
            outcomes[check.name] = stored[check.name]
            continue
        started = time.perf_counter()
        with metered_spread() as spread:
            outcomes[check.name] = check.fn(store, success, stage)
        costs[check.name] = {
            "wall_seconds": round(time.perf_counter() - started, 4),
            "tasks": spread.tasks,
            "task_seconds": round(spread.task_seconds, 4),
        }
    if costs:
        store.write_json(
            layout.check_outcomes(success.prefix),
            {name: asdict(outcome) for name, outcome in outcomes.items()},
        )
        store.write_json(layout.check_costs(success.prefix), costs)
    return outcomes
