"""Turns a ``Stage`` into a partitioned Dagster asset with its asset checks.

The asset always reports a materialization, even on a cache hit, carrying the stage's data version,
so the UI and lineage stay true while the stage contract decides whether work is done.

A stage whose cross-batch state needs earlier landed batches that have not reached it yet raises
``EarlierBatchPending`` (``engine.refs``). The asset turns that into ``RetryRequested``: the step ends (its
pool slot is freed) and is retried after a backoff, so concurrent runs and backfills in any order wait for
the earlier batches and write what serial runs in id order write. The wait is bounded
(``PENDING_MAX_RETRIES``, and ``NOBODY_RUNNING_GRACE_SECONDS`` when no run is processing the earlier batches):
a batch whose earlier batch is landed but never run fails with a message naming the batches to run
(``fm run <batch>``), instead of holding its run slot forever; every retry says what it waits for. Earlier batches are never
blocked by later ones, so runs queued in id order (the landing sensor, ``fm run``) always make progress.
"""

import json
from typing import Any, NoReturn

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    DagsterInstance,
    DagsterRunStatus,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    RetryRequested,
    RunsFilter,
    asset,
)

from fm_assets.defs.conventions import COLUMN_SCHEMA, ROW_COUNT, table_schema
from fm_assets.defs.partitions import batch_partitions
from fm_assets.engine import progress
from fm_assets.engine.checks import CheckOutcome, stage_checks
from fm_assets.engine.identifiers import check_batch_id
from fm_assets.engine.materialize import materialize
from fm_assets.engine.pool import preload_in_workers
from fm_assets.engine.refs import EarlierBatchPending
from fm_assets.engine.stage import Stage, StageContext
from fm_assets.engine.store import ObjectStore

# what a stage may ask for through StageContext.resource(); bound in defs/resources/
STAGE_RESOURCES = ("spark", "blocklists", "eval_registry")

# Waiting for earlier batches (EarlierBatchPending): retry after PENDING_FIRST_WAIT_SECONDS, doubling up to
# PENDING_MAX_WAIT_SECONDS, at most PENDING_MAX_RETRIES times (about two hours in all), then fail.
PENDING_FIRST_WAIT_SECONDS = 5.0
PENDING_MAX_WAIT_SECONDS = 60.0
PENDING_MAX_RETRIES = 125


# with no run queued or running for the batches a step waits for, give up after this long (the landing sensor
# ticks every 30 s, so a batch it is about to run has a run by then)
NOBODY_RUNNING_GRACE_SECONDS = 150.0
NAMED_ACTIVE_CHECKS = 10  # batches whose runs are looked up per retry
ACTIVE_RUN_STATUSES = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
                       DagsterRunStatus.STARTED]  # fmt: skip


def pending_wait_seconds(retry_number: int) -> float:
    """The backoff before retry ``retry_number + 1`` of a step waiting for earlier batches."""
    return min(PENDING_FIRST_WAIT_SECONDS * 2 ** min(retry_number, 16), PENDING_MAX_WAIT_SECONDS)


def retry_when_pending(context: AssetExecutionContext, pending: EarlierBatchPending) -> NoReturn:
    """Raise ``RetryRequested`` for ``pending`` while the wait can end; then fail the step with the error
    itself, saying how long it waited and which batches to run. Every retry says what it waits for (a
    warning in the event log and a ``wait`` progress event, which `fm run` prints). The wait ends early
    when, after ``NOBODY_RUNNING_GRACE_SECONDS``, no run is queued or running for any batch it waits for
    (a batch stamped earlier that finished landing later, never run: waiting would last the whole budget).
    Call it in the ``except`` block."""
    attempt = context.retry_number
    waited = sum(pending_wait_seconds(n) for n in range(attempt))
    active = runs_processing(context.instance, pending.missing, exclude=context.run_id)
    if attempt >= PENDING_MAX_RETRIES or (not active and waited >= NOBODY_RUNNING_GRACE_SECONDS):
        final = pending.gave_up(waited)
        context.log.error(str(final))
        raise final from None  # the root cause `fm run` and the UI show
    wait = pending_wait_seconds(attempt)
    shown = ", ".join(pending.missing[:3]) + (
        f" and {len(pending.missing) - 3} more" if len(pending.missing) > 3 else ""
    )
    line = (
        f"{pending.waiter} waits for earlier landed batch(es) {shown} (stamped before this one, no `{pending.stage}` "
        f"output yet): {pending.purpose}. "
        + (f"Run(s) {', '.join(active[:3])} are processing them" if active
           else f"No run is processing them: gives up after {NOBODY_RUNNING_GRACE_SECONDS:.0f}s unless one starts "
                f"(`fm run {' '.join(pending.missing[:3])}`)")
        + f"; retry {attempt + 1} in {wait:.0f}s."
    )  # fmt: skip
    context.log.warning(line)
    progress.emit("wait", context.asset_key.to_user_string(), context.partition_key, {"message": line})
    raise RetryRequested(max_retries=PENDING_MAX_RETRIES, seconds_to_wait=wait) from pending


def runs_processing(instance: DagsterInstance, batches: list[str], *, exclude: str) -> list[str]:
    """Ids of the queued or running Dagster runs (`fm run`, the sensor, a backfill) of any of ``batches``."""
    found: list[str] = []
    for batch in batches[:NAMED_ACTIVE_CHECKS]:
        runs = instance.get_runs(
            filters=RunsFilter(statuses=ACTIVE_RUN_STATUSES, tags={"dagster/partition": batch}), limit=5
        )
        found += [run.run_id for run in runs if run.run_id != exclude]
    return found


def check_results(stage: Stage, outcomes: dict[str, CheckOutcome]) -> list[AssetCheckResult]:
    """The stage's check outcomes as Dagster asset check results."""
    results = []
    for check in stage_checks(stage):
        outcome = outcomes[check.name]
        results.append(
            AssetCheckResult(
                check_name=check.name,
                passed=outcome.passed,
                severity=AssetCheckSeverity.WARN if check.warn_only else AssetCheckSeverity.ERROR,
                metadata={k: _metadata_value(v) for k, v in outcome.metadata.items()},
                description=outcome.description or check.description,
            )
        )
    return results


def _metadata_value(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return MetadataValue.json(value)
    if value is None:
        return MetadataValue.text("null")
    return value


def build_stage_asset(stage: Stage, pipeline_version: str, group_name: str) -> AssetsDefinition:
    """The partitioned asset of ``stage`` in ``group_name`` (its chain: ``text`` or ``media``), with the
    stage's checks as asset checks and its output schema as the column schema."""
    specs = [
        AssetCheckSpec(
            check.name,
            asset=stage.name,
            blocking=check.blocking,
            description=check.description,
            partitions_def=batch_partitions,  # results belong to the batch they checked (Checks tab per partition)
        )
        for check in stage_checks(stage)
    ]
    deps = ([stage.upstream] if stage.upstream else []) + list(stage.side_input_assets)
    # a run's first pool starts its fork server: every stage of the run finds its libraries there
    preload_in_workers(stage.worker_modules)

    @asset(
        name=stage.name,
        partitions_def=batch_partitions,
        code_version=stage.code_version,
        deps=deps,
        check_specs=specs,
        group_name=group_name,
        description=stage.description,
        required_resource_keys={"store", "pipeline", *STAGE_RESOURCES},
        kinds={stage.kind},
        pool="spark" if stage.kind == "spark" else None,
        metadata={COLUMN_SCHEMA: table_schema(stage.output_schema)},
    )
    def _stage_asset(context: AssetExecutionContext) -> MaterializeResult:
        batch = check_batch_id(context.partition_key)  # a key added by hand (UI, API) is a path component too
        store: ObjectStore = context.resources.store.store()
        ctx = StageContext(
            store=store,
            batch=batch,
            settings=context.resources.pipeline,
            resources={name: getattr(context.resources, name) for name in STAGE_RESOURCES},
            pipeline_version=pipeline_version,
        )
        try:
            done = materialize(stage, ctx)
        except EarlierBatchPending as pending:
            retry_when_pending(context, pending)
        outcome, wall = done.outcome, done.wall_seconds
        counts = outcome.success.counts
        context.log.info(
            f"{stage.name}[{batch}]: {'cache hit, no work done' if outcome.cache_hit else 'computed'} "
            f"({counts.records_in} in, {counts.records_out} out, {counts.records_rejected} rejected)"
        )
        return MaterializeResult(
            data_version=DataVersion(outcome.data_version),
            metadata={
                ROW_COUNT: counts.records_out,
                "cache_hit": outcome.cache_hit,
                "stage_key": outcome.key,
                "path": MetadataValue.path(store.uri(outcome.prefix)),
                "records_in": counts.records_in,
                "records_out": counts.records_out,
                "records_rejected": counts.records_rejected,
                "rejects_by_reason": MetadataValue.json(outcome.success.rejects_by_reason),
                "units_computed": outcome.units_computed,
                "units_resumed": outcome.units_skipped,
                "wall_seconds": round(wall, 3),
                "extra": MetadataValue.json(json.loads(json.dumps(outcome.success.extra))),
            },
            check_results=check_results(stage, done.checks),
        )

    return _stage_asset
