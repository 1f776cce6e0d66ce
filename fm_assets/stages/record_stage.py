"""Shared shape of the record-at-a-time stages: read a part in batches, keep, change or reject each record."""

from __future__ import annotations

from typing import Any

from fm_assets.stage import Stage, StageContext
from fm_assets.stage_runtime import StageRun, UnitResult, UnitWriter, WorkUnit
from fm_assets.steps.records import reject_row


class Rejection(Exception):
    """Raised by ``transform`` to drop a record with a reason and details."""

    def __init__(self, reason: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.details = details or {}


class RecordStage(Stage):
    """A stage whose output for a record depends only on that record (and fixed side inputs)."""

    def transform(self, ctx: StageContext, record: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        """Return the (possibly changed) record, or raise Rejection. ``extra`` accumulates unit metrics."""
        raise NotImplementedError

    def process(self, ctx: StageContext, run: StageRun, unit: WorkUnit, writer: UnitWriter) -> UnitResult:
        records_in = 0
        extra: dict[str, Any] = {}
        for part in unit.inputs:
            for record in run.iter_rows(part):
                records_in += 1
                try:
                    writer.write(self.transform(ctx, record, extra))
                except Rejection as rejection:
                    writer.reject(
                        reject_row(record, batch=ctx.batch, stage=self.name, reason=rejection.reason, details=rejection.details)
                    )
        return UnitResult(records_in=records_in, extra=extra)
