"""Work a stage spreads over units before its own units run: an auxiliary output of the stage.

A stage whose ``prepare`` is partition-wide but has a per-part first step (near_dedup's MinHash signatures)
runs that step as units of a named output beside its own, ``stages/<stage>/<batch>/<name>-<key>/``: same
executor (in-process, worker pool or Spark tasks), same unit commits, resume, purity checks and upstream
verification as any output, byte-identical for any worker count. The key holds only what the step depends
on (its code version, its config and the upstream data version), so later runs of the stage whose other
inputs changed (an earlier batch's index) reuse it. It is a cache: a damaged one is deleted and recomputed.
The stage lists the auxiliary outputs it used under its ``aux_outputs`` artifact, so the cost report charges
their units to it.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from fm_assets.engine.integrity import DamagedDataError
from fm_assets.engine.layout import AUX_OUTPUTS
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import read_success_at
from fm_assets.engine.run import ProcessUnit, stage_run_for, units_read
from fm_assets.engine.stage import StageContext, WorkUnit
from fm_assets.engine.store import ObjectStore, read_parquet_tables

log = logging.getLogger(__name__)

__all__ = ["AUX_OUTPUTS", "read_aux_table", "run_aux_units"]


def run_aux_units(
    ctx: StageContext,
    *,
    stage: str,
    name: str,
    code_version: str,
    config: dict[str, Any],
    units: list[WorkUnit],
    process: ProcessUnit,
    output_schema: pa.Schema,
) -> StageSuccess:
    """Run ``process`` over ``units`` (which read ``ctx``'s upstream parts) as ``stage``'s output ``name``."""
    upstream = ctx.upstream_input
    run = stage_run_for(
        ctx,
        stage=stage,
        code_version=code_version,
        config=config,
        input_versions={upstream.stage: upstream.data_version},
        output_schema=output_schema,
        output_name=name,
    )
    units_read(run, ctx.store, read_success_at(ctx.store, upstream.prefix), units)
    try:
        return run.execute(units, process).success
    except DamagedDataError:
        if run.cached() is None:  # the damage is upstream (a unit's input): not this cache's to repair
            raise
        log.warning("%s: the stored %s output is damaged; recomputing it", run.label, name)
        ctx.store.delete(run.prefix)
        return run.execute(units, process).success


def read_aux_table(store: ObjectStore, success: StageSuccess, schema: pa.Schema) -> pa.Table:
    """An auxiliary output's rows: its part files concatenated in unit order, as ``schema`` (read several at
    a time: a driver reads every unit's file)."""
    tables = [table.cast(schema) for table in read_parquet_tables(store, success.parts)]
    return pa.concat_tables(tables) if tables else schema.empty_table()
