"""The base class every preprocessing stage implements; the asset factory turns one into a Dagster asset."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from fm_assets.refs import read_success
from fm_assets.stage_runtime import StageInput, StageRun, UnitResult, UnitWriter, WorkUnit, units_from_parts
from fm_assets.steps.records import DOC_SCHEMA
from fm_resources.object_store import ObjectStore
from fm_resources.pipeline_config import PipelineConfigResource


@dataclass
class StageContext:
    """Everything a stage needs for one partition; built by the asset layer (or a test)."""

    store: ObjectStore
    batch: str
    settings: PipelineConfigResource
    resources: dict[str, Any] = field(default_factory=dict)  # tokenizers, spark, ...
    upstream: StageInput | None = None
    state: dict[str, Any] = field(default_factory=dict)  # per-run scratch shared by plan/process/complete


class Stage:
    """One preprocessing stage. Subclasses set the class attributes and implement ``process``."""

    name: ClassVar[str]
    code_version: ClassVar[str]
    upstream: ClassVar[str | None]
    description: ClassVar[str] = ""
    output_schema: ClassVar[pa.Schema] = DOC_SCHEMA
    checks: ClassVar[tuple[Any, ...]] = ()  # StageChecks besides accounting and schema

    def config(self, ctx: StageContext) -> dict[str, Any]:
        """The settings that change this stage's output (hashed into the stage key)."""
        return {}

    def rows_per_file(self, ctx: StageContext) -> int | None:
        """Roll output into several part files of this many rows (None: one part per unit)."""
        return None

    def extra_inputs(self, ctx: StageContext) -> dict[str, str]:
        """Data versions of side inputs besides the upstream stage (prior-batch indexes, tokenizers...)."""
        return {}

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        assert ctx.upstream is not None
        return units_from_parts(ctx.upstream)

    def prepare(self, ctx: StageContext, run: StageRun, units: list[WorkUnit]) -> None:
        """Partition-wide work before units run (e.g. resolve duplicates); re-run on resume, so it must be pure."""

    def process(self, ctx: StageContext, run: StageRun, unit: WorkUnit, writer: UnitWriter) -> UnitResult:
        raise NotImplementedError

    def complete(self, ctx: StageContext, run: StageRun, markers: list[dict[str, Any]]) -> dict[str, Any]:
        """Write partition-level artifacts after all units (before ``_SUCCESS.json``); returns their description."""
        return {}


def resolve_upstream(store: ObjectStore, stage: Stage, batch: str) -> StageInput | None:
    if stage.upstream is None:
        return None
    success = read_success(store, stage.upstream, batch)
    return StageInput(
        stage.upstream, success["prefix"], success["data_version"], tuple(success["parts"]), success["artifacts"]
    )


def run_stage(stage: Stage, ctx: StageContext):
    """Execute ``stage`` for ``ctx.batch`` under the stage contract and return the StageOutcome."""
    if ctx.upstream is None:
        ctx.upstream = resolve_upstream(ctx.store, stage, ctx.batch)
    inputs = dict(stage.extra_inputs(ctx))
    if ctx.upstream is not None:
        inputs[ctx.upstream.stage] = ctx.upstream.data_version
    run = StageRun(
        ctx.store,
        stage=stage.name,
        batch=ctx.batch,
        code_version=stage.code_version,
        config=stage.config(ctx),
        input_versions=inputs,
        output_schema=stage.output_schema,
        rows_per_file=stage.rows_per_file(ctx),
        verify_committed=ctx.settings.verify_committed_units,
        progress=ctx.settings.progress,
    )
    if run.cached() is not None:
        return run.execute([], lambda *_: UnitResult())
    units = stage.plan(ctx)
    stage.prepare(ctx, run, units)
    return run.execute(
        units,
        lambda r, unit, writer: stage.process(ctx, r, unit, writer),
        on_complete=lambda r, markers: stage.complete(ctx, r, markers),
    )
