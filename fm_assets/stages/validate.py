"""validate: declarative record checks (great-expectations) plus the batch-level licence and namespace rules."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from fm_assets.engine.stage import Stage, UnitContext, UnitResult


class ValidateStage(Stage):
    name = "validate"
    code_version = "validate-v1"
    upstream = "land"
    description = "Schema, encoding, licence and namespace checks (great-expectations); failures quarantined."
    worker_modules = (
        "fm_assets.transforms.text.validate",
    )  # great-expectations: once per pool, not per worker

    def process(self, unit: UnitContext) -> UnitResult:
        # great-expectations is heavy to import: load it where it is used, not with the code location.
        from fm_assets.transforms.text.validate import validate_records

        records_in = 0
        for part in unit.unit.inputs:
            for record_batch in unit.iter_batches(part, batch_size=8192):
                table = pa.Table.from_batches([record_batch])
                result = validate_records(table)
                rows = table.to_pylist()
                records_in += len(rows)
                for index, record in enumerate(rows):
                    failures = result.row_failures.get(index)
                    if not failures:
                        unit.write(record)
                        continue
                    reason, details = failures[0]
                    all_reasons: dict[str, Any] = {"all_failures": [name for name, _ in failures], **details}
                    unit.reject(record, reason, all_reasons)
        return UnitResult(records_in=records_in)


STAGE = ValidateStage()
