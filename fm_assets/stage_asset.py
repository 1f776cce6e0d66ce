"""Turns a ``Stage`` into a partitioned Dagster asset with its asset checks.

The asset always reports a materialization, even on a cache hit, carrying the stage's data version,
so the UI and lineage stay true while the stage contract decides whether work is done.
"""


import json
import time
from dataclasses import asdict
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

from fm_assets import progress
from fm_assets.audit import CHECKS_FILE
from fm_assets.checks import COMMON_CHECKS, CheckOutcome, StageCheck
from fm_assets.partitions import batch_partitions
from fm_assets.refs import write_ref
from fm_assets.stage import Stage, StageContext, run_stage

RESOURCE_KEYS = {"store", "pipeline", "tokenizers", "spark"}


def stage_checks(stage: Stage) -> tuple[StageCheck, ...]:
    return (*COMMON_CHECKS, *stage.checks)




def evaluate_checks(stage: Stage, store, success: dict[str, Any]) -> dict[str, CheckOutcome]:
    """Check outcomes for an output folder. Outputs are immutable, so outcomes are stored next to them and a
    cache hit re-reports them instead of re-reading every shard (only checks not stored yet are evaluated)."""
    rel = f"{success['prefix']}/{CHECKS_FILE}"
    stored = store.read_json(rel) if store.exists(rel) else {}
    outcomes = {}
    for check in stage_checks(stage):
        if check.name in stored:
            outcomes[check.name] = CheckOutcome(**stored[check.name])
        else:
            outcomes[check.name] = check.fn(store, success, stage)
    if set(outcomes) - set(stored):
        store.write_json(rel, {name: asdict(outcome) for name, outcome in outcomes.items()})
    return outcomes


def run_checks(stage: Stage, store, success: dict[str, Any]) -> list[AssetCheckResult]:
    results = []
    outcomes = evaluate_checks(stage, store, success)
    for check in stage_checks(stage):
        outcome = outcomes[check.name]
        severity = AssetCheckSeverity.WARN if check.warn_only else AssetCheckSeverity.ERROR
        results.append(
            AssetCheckResult(
                check_name=check.name,
                passed=outcome.passed,
                severity=severity,
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


def build_stage_asset(stage: Stage) -> AssetsDefinition:
    specs = [
        AssetCheckSpec(check.name, asset=stage.name, blocking=check.blocking, description=check.description)
        for check in stage_checks(stage)
    ]

    @asset(
        name=stage.name,
        partitions_def=batch_partitions,
        code_version=stage.code_version,
        deps=[stage.upstream] if stage.upstream else [],
        check_specs=specs,
        group_name="preprocess",
        description=stage.description,
        required_resource_keys=RESOURCE_KEYS,
        kinds={"spark"} if stage.name in ("blocklist", "near_dedup") else {"python"},
    )
    def _stage_asset(context: AssetExecutionContext) -> MaterializeResult:
        batch = context.partition_key
        store = context.resources.store.store()
        ctx = StageContext(
            store=store,
            batch=batch,
            settings=context.resources.pipeline,
            resources={"tokenizers": context.resources.tokenizers, "spark": context.resources.spark},
        )
        progress.emit("start", stage.name, batch)
        started = time.perf_counter()
        outcome = run_stage(stage, ctx)
        wall = time.perf_counter() - started
        write_ref(store, stage.name, batch, outcome.success, cache_hit=outcome.cache_hit, wall_seconds=wall)
        counts = outcome.success["counts"]
        progress.emit("end", stage.name, batch, {"cache_hit": outcome.cache_hit, "wall_seconds": wall, **counts})
        context.log.info(
            f"{stage.name}[{batch}]: {'cache hit, no work done' if outcome.cache_hit else 'computed'} "
            f"({counts['records_in']} in, {counts['records_out']} out, {counts['records_rejected']} rejected)"
        )
        return MaterializeResult(
            data_version=DataVersion(outcome.data_version),
            metadata={
                "cache_hit": outcome.cache_hit,
                "stage_key": outcome.key,
                "path": MetadataValue.path(store.uri(outcome.prefix)),
                "records_in": counts["records_in"],
                "records_out": counts["records_out"],
                "records_rejected": counts["records_rejected"],
                "rejects_by_reason": MetadataValue.json(outcome.success["rejects_by_reason"]),
                "units_computed": outcome.units_computed,
                "units_resumed": outcome.units_skipped,
                "wall_seconds": round(wall, 3),
                "extra": MetadataValue.json(json.loads(json.dumps(outcome.success["extra"]))),
            },
            check_results=run_checks(stage, store, outcome.success),
        )

    return _stage_asset
