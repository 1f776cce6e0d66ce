"""Record-at-a-time stages: read a part in batches; keep, change or drop each record by its ``Verdict``."""

from __future__ import annotations

from typing import Any

from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult
from fm_assets.engine.verdict import Verdict


class RecordStage(Stage):
    """A stage whose output for a record depends only on that record (and fixed side inputs)."""

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        """Keep (``Verdict.kept(changed_record)``) or drop the record; ``metrics`` accumulates unit metrics."""
        raise NotImplementedError

    def process(self, unit: UnitContext) -> UnitResult:
        records_in = 0
        metrics: dict[str, Any] = {}
        for part in unit.unit.inputs:
            for record in unit.iter_rows(part):
                records_in += 1
                verdict = self.judge(unit.partition, record, metrics)
                if verdict.keep:
                    unit.write(record if verdict.record is None else verdict.record)
                else:
                    unit.reject(record, verdict.reason or "rejected", verdict.details)
        return UnitResult(records_in=records_in, extra=metrics)
