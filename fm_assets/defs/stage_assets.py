"""Turns a ``Stage`` into a partitioned Dagster asset with its asset checks.

The asset always reports a materialization, even on a cache hit, carrying the stage's data version,
so the UI and lineage stay true while the stage contract decides whether work is done.
"""


import json
import time
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from fm_assets.defs.partitions import batch_partitions
from fm_assets.engine import progress
from fm_assets.engine.checks import evaluate_checks, stage_checks
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import write_ref
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import Stage, StageContext
from fm_assets.engine.store import ObjectStore

# what a stage may ask for through StageContext.resource(); bound in defs/resources.py
STAGE_RESOURCES = ("spark", "blocklists", "eval_registry")


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


def build_stage_asset(stage: Stage, pipeline_version: str) -> AssetsDefinition:
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
        group_name="preprocess",
        description=stage.description,
        required_resource_keys={"store", "pipeline", *STAGE_RESOURCES},
        kinds={stage.kind},
        pool="spark" if stage.kind == "spark" else None,
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
        outcome = run_stage(stage, ctx)
        wall = time.perf_counter() - started
        write_ref(store, stage.name, batch, outcome.success, cache_hit=outcome.cache_hit, wall_seconds=wall)
        counts = outcome.success.counts
        progress.emit(
            "end", stage.name, batch, {"cache_hit": outcome.cache_hit, "wall_seconds": wall, **counts.to_json()}
        )
        context.log.info(
            f"{stage.name}[{batch}]: {'cache hit, no work done' if outcome.cache_hit else 'computed'} "
            f"({counts.records_in} in, {counts.records_out} out, {counts.records_rejected} rejected)"
        )
        return MaterializeResult(
            data_version=DataVersion(outcome.data_version),
            metadata={
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
