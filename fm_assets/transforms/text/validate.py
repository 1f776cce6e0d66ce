"""Declarative per-row validation of document records with Great Expectations (GX Core 1.x).

One expectation suite states what a valid DOC_SCHEMA record is. It runs in an in-memory
(ephemeral) GX context over a pandas view of the table, once per work unit: GX's fixed cost per
call is tens of milliseconds, so per-record calls would dominate. ``result_format=COMPLETE``
returns every failing row index, which is mapped back to (reason, details) per row.
"""

from __future__ import annotations

import os

# GX reads these at import time: no usage analytics (no network), no progress bars on stderr.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("GE_USAGE_STATS", "FALSE")

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd
import pyarrow as pa
from great_expectations.data_context.types.base import ProgressBarsConfig

log = logging.getLogger(__name__)

NAMESPACES = ("cloud", "on_device", "quarantine")
# One SPDX identifier (Apache-2.0, CC-BY-SA-4.0, GPL-2.0+, LicenseRef-acme-1) or a flat expression of
# them joined by AND / OR / WITH, optionally parenthesised.
SPDX_ID = r"[A-Za-z0-9][A-Za-z0-9.+-]*"
SPDX_EXPRESSION = rf"^\(*{SPDX_ID}\)*(?:\s+(?:AND|OR|WITH)\s+\(*{SPDX_ID}\)*)*$"
VALIDATED_COLUMNS = ("doc_id", "text", "license", "namespace", "source")
DETAIL_VALUE_CHARS = 200


@dataclass(frozen=True, slots=True)
class RowRule:
    """One expectation and the reject reason its failing rows get."""

    reason: str
    column: str
    expectation: gxe.Expectation
    report_value: bool = True  # put the offending value in details (not for large text)


def _rules() -> list[RowRule]:
    rules = [
        RowRule("text_null", "text", gxe.ExpectColumnValuesToNotBeNull(column="text"), report_value=False),
        RowRule("text_empty", "text", gxe.ExpectColumnValuesToMatchRegex(column="text", regex=r"\S"), False),
        RowRule("license_null", "license", gxe.ExpectColumnValuesToNotBeNull(column="license")),
        RowRule(
            "license_not_spdx",
            "license",
            gxe.ExpectColumnValuesToMatchRegex(column="license", regex=SPDX_EXPRESSION),
        ),
        RowRule("namespace_null", "namespace", gxe.ExpectColumnValuesToNotBeNull(column="namespace")),
        RowRule(
            "namespace_unknown",
            "namespace",
            gxe.ExpectColumnValuesToBeInSet(column="namespace", value_set=list(NAMESPACES)),
        ),
        RowRule("source_null", "source", gxe.ExpectColumnValuesToNotBeNull(column="source")),
        RowRule("source_empty", "source", gxe.ExpectColumnValuesToMatchRegex(column="source", regex=r"\S")),
        RowRule("doc_id_null", "doc_id", gxe.ExpectColumnValuesToNotBeNull(column="doc_id")),
        RowRule("doc_id_duplicate", "doc_id", gxe.ExpectColumnValuesToBeUnique(column="doc_id")),
    ]
    return rules


@dataclass
class ValidationResult:
    row_failures: dict[int, list[tuple[str, dict[str, Any]]]]  # row index -> [(reason, details)]
    suite: dict[str, Any] = field(default_factory=dict)  # expectation results summary

    @property
    def success(self) -> bool:
        return not self.row_failures


class _Validator:
    """The GX context, suite and batch definition, built once per process."""

    def __init__(self) -> None:
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        asset = self.context.data_sources.add_pandas("fm_records").add_dataframe_asset("documents")
        self.batch_definition = asset.add_batch_definition_whole_dataframe("work_unit")
        self.rules = _rules()
        self.suite = _suite(self.rules, "fm_document_records")
        self.lock = threading.Lock()


_validator: _Validator | None = None
_validator_lock = threading.Lock()


def _get_validator() -> _Validator:
    global _validator
    with _validator_lock:
        if _validator is None:
            _validator = _Validator()
        return _validator


def _to_frame(table: pa.Table | pd.DataFrame) -> pd.DataFrame:
    if isinstance(table, pa.Table):
        present = [name for name in VALIDATED_COLUMNS if name in table.column_names]
        frame = table.select(present).to_pandas()
    else:
        frame = table[[name for name in VALIDATED_COLUMNS if name in table.columns]]
    return frame.reset_index(drop=True)


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > DETAIL_VALUE_CHARS:
        return value[:DETAIL_VALUE_CHARS] + "…"
    if value is None or (isinstance(value, float) and value != value):  # NaN is pandas' missing value
        return None
    return value


def validate_records(table: pa.Table | pd.DataFrame) -> ValidationResult:
    """Validate document records (DOC_SCHEMA columns) and return each failing row's reasons.

    A missing column fails every row with ``<column>_missing``. Row indices are positions in ``table``.
    """
    started = time.perf_counter()
    frame = _to_frame(table)
    rows = len(frame)
    row_failures: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    missing = [name for name in VALIDATED_COLUMNS if name not in frame.columns]
    for name in missing:
        for row in range(rows):
            row_failures.setdefault(row, []).append((f"{name}_missing", {"column": name}))
    validator = _get_validator()
    expectations: list[dict[str, Any]] = []
    if rows:
        rules = [rule for rule in (_rules() if missing else validator.rules) if rule.column not in missing]
        suite = _suite(rules, "fm_document_records_partial") if missing else validator.suite
        with validator.lock:
            batch = validator.batch_definition.get_batch(batch_parameters={"dataframe": frame})
            outcome = batch.validate(suite, result_format={"result_format": "COMPLETE"})
        results_by_reason = {
            result.expectation_config.meta.get("reason"): result for result in outcome.results
        }
        for rule in rules:
            result = results_by_reason.get(rule.reason)
            if result is None or result.exception_info.get("raised_exception"):
                raise RuntimeError(f"GX could not evaluate {rule.reason}: {result and result.exception_info}")
            indices = result.result.get("unexpected_index_list") or []
            values = result.result.get("unexpected_list") or []
            for position, row in enumerate(indices):
                details: dict[str, Any] = {
                    "column": rule.column,
                    "expectation": rule.expectation.expectation_type,
                }
                if rule.report_value and position < len(values):
                    details["value"] = _short(values[position])
                row_failures.setdefault(int(row), []).append((rule.reason, details))
            expectations.append(
                {
                    "reason": rule.reason,
                    "expectation": rule.expectation.expectation_type,
                    "column": rule.column,
                    "success": bool(result.success),
                    "unexpected_count": int(result.result.get("unexpected_count") or 0),
                }
            )
    seconds = time.perf_counter() - started
    summary = {
        "suite": "fm_document_records",
        "rows": rows,
        "failed_rows": len(row_failures),
        "success": not row_failures,
        "missing_columns": missing,
        "expectations": expectations,
        "seconds": round(seconds, 4),
    }
    log.debug("GX validated %d rows in %.3fs: %d failing", rows, seconds, len(row_failures))
    return ValidationResult(row_failures=dict(sorted(row_failures.items())), suite=summary)


def _suite(rules: list[RowRule], name: str) -> gx.ExpectationSuite:
    suite = gx.ExpectationSuite(name=name)
    for rule in rules:
        rule.expectation.meta = {"reason": rule.reason}  # ties each result back to its rule
        suite.add_expectation(rule.expectation)
    return suite
