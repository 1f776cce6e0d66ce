"""Per-row validation of document records against the great-expectations suite in ``validate_rules``.

The suite (``RULES``: GX expectation types and kwargs) is evaluated here in plain Python with GX's pandas
semantics, so a unit never imports great-expectations (5 s per process, more than a small batch's whole
stage work): a column-map expectation ignores null values (except ``not_be_null``), ``match_regex`` is
``re.search`` on ``str(value)``, ``be_in_set`` is set membership and ``be_unique`` flags every
occurrence of a repeated value. ``validate_gx.gx_validate_records`` runs the same suite through GX itself;
``tests/transforms/readers/test_validate_ge.py`` holds the two to identical results on every rule's
edge cases, so GX stays the definition of what each expectation means.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from fm_assets.transforms.text.validate_rules import (
    IN_SET,
    MATCH_REGEX,
    NOT_NULL,
    RULES,
    SUITE_NAME,
    UNIQUE,
    VALIDATED_COLUMNS,
    RowRule,
)

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

DETAIL_VALUE_CHARS = 200
RowFailures = dict[int, list[tuple[str, dict[str, Any]]]]


@dataclass
class ValidationResult:
    row_failures: RowFailures  # row index -> [(reason, details)]
    suite: dict[str, Any] = field(default_factory=dict)  # expectation results summary

    @property
    def success(self) -> bool:
        return not self.row_failures


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """One expectation's result: the failing row positions, in order, and their values."""

    rule: RowRule
    indices: list[int]
    values: list[Any]


@dataclass(frozen=True, slots=True)
class Columns:
    """The validated columns of a table as Python lists, with each value's null flag (GX's ``isnull``)."""

    rows: int
    values: dict[str, list[Any]]
    nulls: dict[str, list[bool]]

    @property
    def missing(self) -> list[str]:
        return [name for name in VALIDATED_COLUMNS if name not in self.values]


def columns_of(table: pa.Table | pd.DataFrame) -> Columns:
    """Row positions (not a frame's index labels) and values of the validated columns present."""
    values: dict[str, list[Any]] = {}
    nulls: dict[str, list[bool]] = {}
    if isinstance(table, pa.Table):
        for name in VALIDATED_COLUMNS:
            if name in table.column_names:
                column = table.column(name)
                values[name] = column.to_pylist()
                # pandas reads a float NaN as missing too
                is_null = column.is_null(nan_is_null=pa.types.is_floating(column.type))
                nulls[name] = is_null.to_pylist()
        return Columns(table.num_rows, values, nulls)
    for name in VALIDATED_COLUMNS:
        if name in table.columns:
            values[name] = table[name].tolist()
            nulls[name] = table[name].isna().tolist()
    return Columns(len(table), values, nulls)


def _unexpected(rule: RowRule, values: Sequence[Any], nulls: Sequence[bool]) -> list[int]:
    if rule.expectation_type == NOT_NULL:
        return [row for row, null in enumerate(nulls) if null]
    present = [row for row, null in enumerate(nulls) if not null]
    if rule.expectation_type == MATCH_REGEX:
        search = re.compile(rule.kwargs["regex"]).search
        return [row for row in present if search(str(values[row])) is None]
    if rule.expectation_type == IN_SET:
        allowed = set(rule.kwargs["value_set"])
        return [row for row in present if values[row] not in allowed]
    if rule.expectation_type == UNIQUE:
        counts = Counter(values[row] for row in present)
        return [row for row in present if counts[values[row]] > 1]
    raise ValueError(f"validate: no evaluator for {rule.expectation_type} ({rule.reason})")


def evaluate_rules(columns: Columns, rules: Sequence[RowRule]) -> list[RuleOutcome]:
    """Each rule's failing rows in ``columns`` (rules on missing columns are skipped)."""
    outcomes = []
    for rule in rules:
        if rule.column not in columns.values:
            continue
        values = columns.values[rule.column]
        indices = _unexpected(rule, values, columns.nulls[rule.column])
        outcomes.append(RuleOutcome(rule, indices, [values[row] for row in indices]))
    return outcomes


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > DETAIL_VALUE_CHARS:
        return value[:DETAIL_VALUE_CHARS] + "…"
    if value is None or (isinstance(value, float) and value != value):  # NaN is pandas' missing value
        return None
    return value


def validation_result(
    columns: Columns,
    evaluate: Callable[[Columns, Sequence[RowRule]], list[RuleOutcome]],
    rules: Sequence[RowRule] = RULES,
) -> ValidationResult:
    """Run ``evaluate`` (this module's or GX's) over ``columns`` and map its outcomes to each failing row's
    (reason, details) and the suite summary. A missing column fails every row with ``<column>_missing``."""
    started = time.perf_counter()
    missing = columns.missing
    row_failures: RowFailures = {}
    for name in missing:
        for row in range(columns.rows):
            row_failures.setdefault(row, []).append((f"{name}_missing", {"column": name}))
    expectations: list[dict[str, Any]] = []
    if columns.rows:
        for outcome in evaluate(columns, [rule for rule in rules if rule.column not in missing]):
            rule = outcome.rule
            for position, row in enumerate(outcome.indices):
                details: dict[str, Any] = {"column": rule.column, "expectation": rule.expectation_type}
                if rule.report_value and position < len(outcome.values):
                    details["value"] = _short(outcome.values[position])
                row_failures.setdefault(int(row), []).append((rule.reason, details))
            expectations.append(
                {
                    "reason": rule.reason,
                    "expectation": rule.expectation_type,
                    "column": rule.column,
                    "success": not outcome.indices,
                    "unexpected_count": len(outcome.indices),
                }
            )
    seconds = time.perf_counter() - started
    summary = {
        "suite": SUITE_NAME,
        "rows": columns.rows,
        "failed_rows": len(row_failures),
        "success": not row_failures,
        "missing_columns": missing,
        "expectations": expectations,
        "seconds": round(seconds, 4),
    }
    log.debug("validated %d rows in %.3fs: %d failing", columns.rows, seconds, len(row_failures))
    return ValidationResult(row_failures=dict(sorted(row_failures.items())), suite=summary)


def validate_records(table: pa.Table | pd.DataFrame) -> ValidationResult:
    """Validate document records (DOC_SCHEMA columns) and return each failing row's reasons.

    A missing column fails every row with ``<column>_missing``. Row indices are positions in ``table``.
    """
    return validation_result(columns_of(table), evaluate_rules)
