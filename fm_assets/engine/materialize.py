"""One materialization of a stage for one batch: what the Dagster asset does, and what tests do to stand in
for a run.

``materialize`` runs the stage (``run.run_stage``: cache hit or compute), points the stage's ref at the
output (``refs.write_ref``, with the wall time) and clears an earlier failure record; a stage that fails
leaves its ``failures/<stage>/<batch>.json`` record (``refs.record_failure``: the release holds the batch
back until it passes) and the error propagates. ``EarlierBatchPending`` is not a failure: it propagates
without a record, for the caller to wait and retry. Then the stage's checks are evaluated (stored next to
the output; a cache hit re-reports them) and returned with the outcome; a check's per-part work runs on the
stage's worker pool.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fm_assets.engine import progress
from fm_assets.engine.checks import CheckOutcome, evaluate_checks
from fm_assets.engine.pool import resolve_workers, spread_over
from fm_assets.engine.refs import EarlierBatchPending, clear_failure, record_failure, write_ref
from fm_assets.engine.run import StageOutcome, run_stage
from fm_assets.engine.stage import Stage, StageContext


@dataclass(frozen=True)
class Materialization:
    """A stage's outcome for one batch, its wall time and its checks' outcomes (by check name)."""

    outcome: StageOutcome
    wall_seconds: float
    checks: dict[str, CheckOutcome]


def materialize(stage: Stage, ctx: StageContext) -> Materialization:
    """Run ``stage`` for ``ctx.batch``, write its ref (or its failure record) and evaluate its checks."""
    store, batch = ctx.store, ctx.batch
    progress.emit("start", stage.name, batch)
    started = time.perf_counter()
    local = ctx.settings.unit_executor == "local"
    try:
        # driver-side work that hands chunks to pool.map_on_workers (near_dedup's exact scoring) uses the
        # stage's local workers; with one worker, or on Spark, it stays in this process
        with spread_over(resolve_workers(ctx.settings.workers) if local else 1):
            outcome = run_stage(stage, ctx)
    except EarlierBatchPending:
        raise  # waiting, not failing: the caller retries
    except Exception as error:
        record_failure(store, stage.name, batch, error)  # the release holds this batch back until it passes
        raise
    wall = time.perf_counter() - started
    write_ref(store, stage.name, batch, outcome.success, cache_hit=outcome.cache_hit, wall_seconds=wall)
    clear_failure(store, stage.name, batch)
    progress.emit(
        "end",
        stage.name,
        batch,
        {"cache_hit": outcome.cache_hit, "wall_seconds": wall, **outcome.success.counts.to_json()},
    )
    # checks that read every part (decontaminate's re-scan, tokenize's HF re-encode) spread over the
    # stage's local workers (engine.pool.map_on_workers) instead of running serially in this process; sized as
    # the stage's own pool (workers capped by its units), so the check reuses that pool instead of starting one
    workers = min(resolve_workers(ctx.settings.workers), len(outcome.success.units)) if local else 1
    with spread_over(workers):
        checks = evaluate_checks(stage, store, outcome.success)
    return Materialization(outcome, wall, checks)
