"""validate: declarative record checks (great-expectations) plus the batch-level licence and namespace rules."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from fm_assets.stage import Stage, StageContext
from fm_assets.stage_runtime import StageRun, UnitResult, UnitWriter, WorkUnit
from fm_assets.steps.records import reject_row
from fm_assets.steps.validate_ge import validate_records


class ValidateStage(Stage):
    name = "validate"
    code_version = "validate-v1"
    upstream = "land"
    description = "Schema, encoding, licence and namespace checks (great-expectations); failures quarantined."

    def process(self, ctx: StageContext, run: StageRun, unit: WorkUnit, writer: UnitWriter) -> UnitResult:
        records_in = 0
        for part in unit.inputs:
            for record_batch in run.iter_batches(part, batch_size=8192):
                table = pa.Table.from_batches([record_batch])
                result = validate_records(table)
                rows = table.to_pylist()
                records_in += len(rows)
                for index, record in enumerate(rows):
                    failures = result.row_failures.get(index)
                    if not failures:
                        writer.write(record)
                        continue
                    reason, details = failures[0]
                    all_reasons: dict[str, Any] = {"all_failures": [name for name, _ in failures], **details}
                    writer.reject(reject_row(record, batch=ctx.batch, stage=self.name, reason=reason, details=all_reasons))
        return UnitResult(records_in=records_in)


STAGE = ValidateStage()
