"""The record suite (``validate_rules.RULES``) run through great-expectations itself (GX Core 1.x).

The reference for ``validate.evaluate_rules``: the same expectations as GX objects, in an in-memory
(ephemeral) GX context over a pandas view of the columns, ``result_format=COMPLETE`` for every failing
row. Units do not use it (importing GX costs seconds per process); the tests compare the two evaluations
on every rule's edge cases, and ``gx_suite()`` is the suite as GX sees it (for GX's own tooling).
"""

from __future__ import annotations

import os

# GX reads these at import time: no usage analytics (no network), no progress bars on stderr.
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("GE_USAGE_STATS", "FALSE")

import threading
from collections.abc import Sequence

import great_expectations as gx
import great_expectations.expectations as gxe
import pandas as pd
import pyarrow as pa
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.expectations.expectation import Expectation

from fm_assets.transforms.text.validate import (
    Columns,
    RuleOutcome,
    ValidationResult,
    columns_of,
    validation_result,
)
from fm_assets.transforms.text.validate_rules import RULES, SUITE_NAME, RowRule


def gx_expectation(rule: RowRule) -> Expectation:
    """``rule`` as a GX expectation (class named after its type), tagged with its reason."""
    class_name = "".join(part.title() for part in rule.expectation_type.split("_"))
    expectation = getattr(gxe, class_name)(column=rule.column, **rule.kwargs)
    expectation.meta = {"reason": rule.reason}  # ties each result back to its rule
    return expectation


def gx_suite(rules: Sequence[RowRule] = RULES, name: str = SUITE_NAME) -> gx.ExpectationSuite:
    suite = gx.ExpectationSuite(name=name)
    for rule in rules:
        suite.add_expectation(gx_expectation(rule))
    return suite


class _Validator:
    """The GX context and batch definition, built once per process."""

    def __init__(self) -> None:
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        asset = self.context.data_sources.add_pandas("fm_records").add_dataframe_asset("documents")
        self.batch_definition = asset.add_batch_definition_whole_dataframe("work_unit")
        self.lock = threading.Lock()


_validator: _Validator | None = None
_validator_lock = threading.Lock()


def _get_validator() -> _Validator:
    global _validator
    with _validator_lock:
        if _validator is None:
            _validator = _Validator()
        return _validator


def gx_evaluate_rules(columns: Columns, rules: Sequence[RowRule]) -> list[RuleOutcome]:
    """Each rule's failing rows, as great-expectations finds them."""
    frame = pd.DataFrame(columns.values)
    validator = _get_validator()
    with validator.lock:
        batch = validator.batch_definition.get_batch(batch_parameters={"dataframe": frame})
        outcome = batch.validate(
            gx_suite(rules, f"{SUITE_NAME}_run"), result_format={"result_format": "COMPLETE"}
        )
    by_reason = {
        (config.meta or {}).get("reason"): result
        for result in outcome.results
        if (config := result.expectation_config) is not None
    }
    outcomes = []
    for rule in rules:
        result = by_reason.get(rule.reason)
        if result is None or result.exception_info.get("raised_exception"):
            raise RuntimeError(f"GX could not evaluate {rule.reason}: {result and result.exception_info}")
        indices = [int(row) for row in result.result.get("unexpected_index_list") or []]
        outcomes.append(RuleOutcome(rule, indices, list(result.result.get("unexpected_list") or [])))
    return outcomes


def gx_validate_records(table: pa.Table | pd.DataFrame) -> ValidationResult:
    """``validate.validate_records`` with great-expectations doing the evaluation."""
    return validation_result(columns_of(table), gx_evaluate_rules)
