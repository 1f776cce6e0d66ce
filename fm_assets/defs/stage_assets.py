"""Turns a ``Stage`` into a partitioned Dagster asset with its asset checks.

The asset always reports a materialization, even on a cache hit, carrying the stage's data version,
so the UI and lineage stay true while the stage contract decides whether work is done.

A stage whose cross-batch state needs earlier landed batches that have not reached it yet raises
``EarlierBatchPending`` (``engine.refs``). The asset turns that into ``RetryRequested``: the step ends (its
pool slot is freed) and is retried after a backoff, so concurrent runs and backfills in any order wait for
the earlier batches and write what serial runs in id order write. The wait is bounded
(``PENDING_MAX_RETRIES``): a batch whose earlier batch is landed but never run fails with a message naming
the batches to run (``fm run <batch>``), instead of holding its run slot forever. Earlier batches are never
blocked by later ones, so runs queued in id order (the landing sensor, ``fm run``) always make progress.
"""

import json
import time
from typing import Any, NoReturn

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    RetryRequested,
    asset,
)

from fm_assets.defs.conventions import COLUMN_SCHEMA, ROW_COUNT, table_schema
from fm_assets.defs.partitions import batch_partitions
from fm_assets.engine import progress
from fm_assets.engine.checks import evaluate_checks, stage_checks
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import EarlierBatchPending, clear_failure, record_failure, write_ref
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import Stage, StageContext
from fm_assets.engine.store import ObjectStore

# what a stage may ask for through StageContext.resource(); bound in defs/resources.py
STAGE_RESOURCES = ("spark", "blocklists", "eval_registry")

# Waiting for earlier batches (EarlierBatchPending): retry after PENDING_FIRST_WAIT_SECONDS, doubling up to
# PENDING_MAX_WAIT_SECONDS, at most PENDING_MAX_RETRIES times (about two hours in all), then fail.
PENDING_FIRST_WAIT_SECONDS = 5.0
PENDING_MAX_WAIT_SECONDS = 60.0
PENDING_MAX_RETRIES = 125


def pending_wait_seconds(retry_number: int) -> float:
    """The backoff before retry ``retry_number + 1`` of a step waiting for earlier batches."""
    return min(PENDING_FIRST_WAIT_SECONDS * 2 ** min(retry_number, 16), PENDING_MAX_WAIT_SECONDS)


def retry_when_pending(context: AssetExecutionContext, pending: EarlierBatchPending) -> NoReturn:
    """Raise ``RetryRequested`` for ``pending`` while the wait budget lasts; then fail the step with the
    error itself, saying how long it waited and which batches to run. Call it in the ``except`` block."""
    attempt = context.retry_number
    if attempt >= PENDING_MAX_RETRIES:
        final = pending.gave_up(sum(pending_wait_seconds(n) for n in range(attempt)))
        context.log.error(str(final))
        raise final from None  # the root cause `fm run` and the UI show
    wait = pending_wait_seconds(attempt)
    context.log.warning(
        f"{pending} Retrying in {wait:.0f}s (retry {attempt + 1} of at most {PENDING_MAX_RETRIES})."
    )
    raise RetryRequested(max_retries=PENDING_MAX_RETRIES, seconds_to_wait=wait) from pending


def run_checks(stage: Stage, store: ObjectStore, success: StageSuccess) -> list[AssetCheckResult]:
    outcomes = evaluate_checks(stage, store, success)
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
        batch = context.partition_key
        store: ObjectStore = context.resources.store.store()
        ctx = StageContext(
            store=store,
            batch=batch,
            settings=context.resources.pipeline,
            resources={name: getattr(context.resources, name) for name in STAGE_RESOURCES},
            pipeline_version=pipeline_version,
        )
        progress.emit("start", stage.name, batch)
        started = time.perf_counter()
        try:
            outcome = run_stage(stage, ctx)
        except EarlierBatchPending as pending:
            retry_when_pending(context, pending)
        except Exception as error:
            record_failure(
                store, stage.name, batch, error
            )  # the release holds this batch back until it passes
            raise
        wall = time.perf_counter() - started
        write_ref(store, stage.name, batch, outcome.success, cache_hit=outcome.cache_hit, wall_seconds=wall)
        clear_failure(store, stage.name, batch)
        counts = outcome.success.counts
        progress.emit(
            "end",
            stage.name,
            batch,
            {"cache_hit": outcome.cache_hit, "wall_seconds": wall, **counts.to_json()},
        )
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
            check_results=run_checks(stage, store, outcome.success),
        )

    return _stage_asset
