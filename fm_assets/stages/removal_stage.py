"""Shared shape of the stages that drop documents decided partition-wide (exact dedup, Spark removals).

``prepare`` decides once which doc ids go (doc id -> reason, details); the work units stay one per
upstream part and stream it, writing kept records and rejecting the rest, so accounting stays exact
and part sizes (and so downstream memory) stay bounded.
"""

from __future__ import annotations

from typing import Any

from fm_assets.stage import Stage, StageContext
from fm_assets.stage_runtime import StageRun, UnitResult, UnitWriter, WorkUnit
from fm_assets.steps.records import reject_row

Removals = dict[str, tuple[str, dict[str, Any]]]


class RemovalStage(Stage):
    def decide_removals(self, ctx: StageContext, run: StageRun, units: list[WorkUnit]) -> Removals:
        """doc_id -> (reason, details) for every document of the partition this stage drops."""
        raise NotImplementedError

    def prepare(self, ctx: StageContext, run: StageRun, units: list[WorkUnit]) -> None:
        ctx.state["removed"] = self.decide_removals(ctx, run, units)

    def process(self, ctx: StageContext, run: StageRun, unit: WorkUnit, writer: UnitWriter) -> UnitResult:
        removed: Removals = ctx.state["removed"]
        records_in = rejected = 0
        for part in unit.inputs:
            for record in run.iter_rows(part):
                records_in += 1
                hit = removed.get(record["doc_id"])
                if hit is None:
                    writer.write(record)
                else:
                    reason, details = hit
                    rejected += 1
                    writer.reject(reject_row(record, batch=ctx.batch, stage=self.name, reason=reason, details=details))
        return UnitResult(records_in=records_in, extra={"removed": rejected})
