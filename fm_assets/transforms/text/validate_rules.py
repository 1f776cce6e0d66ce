"""The document-record expectation suite, declared once in great-expectations' vocabulary (no GX import).

Each ``RowRule`` is one GX expectation (its ``expectation_type`` and kwargs) plus the reject reason its
failing rows get. ``transforms/text/validate.py`` evaluates the suite at run time with GX's pandas
semantics; ``transforms/text/validate_gx.py`` builds the very same suite as GX objects and runs it through
great-expectations, the reference that the tests hold the run-time evaluation to, row for row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NAMESPACES = ("cloud", "on_device", "quarantine")
# One SPDX identifier (Apache-2.0, CC-BY-SA-4.0, GPL-2.0+, LicenseRef-acme-1) or a flat expression of
# them joined by AND / OR / WITH, optionally parenthesised.
SPDX_ID = r"[A-Za-z0-9][A-Za-z0-9.+-]*"
SPDX_EXPRESSION = rf"^\(*{SPDX_ID}\)*(?:\s+(?:AND|OR|WITH)\s+\(*{SPDX_ID}\)*)*$"
VALIDATED_COLUMNS = ("doc_id", "text", "license", "namespace", "source")
SUITE_NAME = "fm_document_records"

NOT_NULL = "expect_column_values_to_not_be_null"
MATCH_REGEX = "expect_column_values_to_match_regex"
IN_SET = "expect_column_values_to_be_in_set"
UNIQUE = "expect_column_values_to_be_unique"


@dataclass(frozen=True, slots=True)
class RowRule:
    """One expectation on one column and the reject reason its failing rows get."""

    reason: str
    column: str
    expectation_type: str
    kwargs: dict[str, Any] = field(default_factory=dict)  # besides ``column``: regex, value_set
    report_value: bool = True  # put the offending value in details (not for large text)


RULES: tuple[RowRule, ...] = (
    RowRule("text_null", "text", NOT_NULL, report_value=False),
    RowRule("text_empty", "text", MATCH_REGEX, {"regex": r"\S"}, report_value=False),
    RowRule("license_null", "license", NOT_NULL),
    RowRule("license_not_spdx", "license", MATCH_REGEX, {"regex": SPDX_EXPRESSION}),
    RowRule("namespace_null", "namespace", NOT_NULL),
    RowRule("namespace_unknown", "namespace", IN_SET, {"value_set": list(NAMESPACES)}),
    RowRule("source_null", "source", NOT_NULL),
    RowRule("source_empty", "source", MATCH_REGEX, {"regex": r"\S"}),
    RowRule("doc_id_null", "doc_id", NOT_NULL),
    RowRule("doc_id_duplicate", "doc_id", UNIQUE),
)
