"""validate: the declarative record checks (the great-expectations suite in ``transforms/text/validate_rules``,
evaluated without importing GX: see ``transforms/text/validate``); failing records are quarantined."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from fm_assets.engine.stage import Stage, UnitContext, UnitResult
from fm_assets.transforms.text.validate import validate_records


class ValidateStage(Stage):
    name = "validate"
    code_version = "validate-v1"
    upstream = "land"
    description = "Schema, encoding, licence and namespace checks (great-expectations); failures quarantined."

    def process(self, unit: UnitContext) -> UnitResult:
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
