"""Record validation reports every failing row with its reason, and the run-time evaluation of the suite
gives exactly what great-expectations gives on the same rows (GX defines what each expectation means)."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable

import pandas as pd
import pyarrow as pa
import pytest

from fm_assets.engine.schemas import DOC_SCHEMA, docs_table, make_doc_id
from fm_assets.transforms.text.validate import ValidationResult, validate_records
from fm_assets.transforms.text.validate_gx import gx_suite, gx_validate_records
from fm_assets.transforms.text.validate_rules import RULES

Validate = Callable[[pa.Table | pd.DataFrame], ValidationResult]
EVALUATORS = pytest.mark.parametrize(
    "validate", [validate_records, gx_validate_records], ids=["native", "gx"]
)


def _rows(count: int) -> list[dict]:
    return [
        {
            "doc_id": make_doc_id("ab" * 32, i),
            "batch": "b1",
            "source": "web",
            "license": "CC-BY-SA-4.0",
            "namespace": "cloud",
            "cas_hash": "ab" * 32,
            "record_index": i,
            "url": None,
            "text": f"document {i}",
        }
        for i in range(count)
    ]


def _loose_table(rows: list[dict]) -> pa.Table:
    """DOC_SCHEMA with every field nullable, so tests can hold the nulls real bad data would."""
    schema = pa.schema([field.with_nullable(True) for field in DOC_SCHEMA])
    return pa.Table.from_pylist(rows, schema=schema)


@EVALUATORS
def test_clean_table_passes(validate: Validate) -> None:
    result = validate(docs_table(_rows(50)))
    assert result.row_failures == {} and result.success
    assert result.suite["rows"] == 50 and all(e["success"] for e in result.suite["expectations"])


@EVALUATORS
def test_each_rule_flags_exactly_its_rows(validate: Validate) -> None:
    rows = _rows(12)
    rows[1]["text"] = None
    rows[2]["text"] = "  \n "
    rows[3]["license"] = None
    rows[4]["license"] = "some licence, I think"
    rows[5]["namespace"] = "public"
    rows[6]["source"] = ""
    rows[7]["doc_id"] = rows[8]["doc_id"]
    rows[9]["license"] = "(MIT OR Apache-2.0) AND LicenseRef-acme-1.0"  # valid expression
    rows[10]["license"] = "GPL-2.0+"  # valid
    rows[11]["namespace"] = None
    result = validate(_loose_table(rows))
    reasons = {row: sorted(reason for reason, _ in failures) for row, failures in result.row_failures.items()}
    assert reasons == {
        1: ["text_null"],
        2: ["text_empty"],
        3: ["license_null"],
        4: ["license_not_spdx"],
        5: ["namespace_unknown"],
        6: ["source_empty"],
        7: ["doc_id_duplicate"],
        8: ["doc_id_duplicate"],
        11: ["namespace_null"],
    }
    [(_, details)] = result.row_failures[4]
    assert details["value"] == "some licence, I think" and details["column"] == "license"
    assert not result.success and result.suite["failed_rows"] == 9
    by_reason = {e["reason"]: e["unexpected_count"] for e in result.suite["expectations"]}
    assert by_reason["doc_id_duplicate"] == 2 and by_reason["text_null"] == 1


@EVALUATORS
def test_row_can_fail_several_rules_and_pandas_input_works(validate: Validate) -> None:
    rows = _rows(3)
    rows[2].update(text="", license="???", namespace="elsewhere", source=None)
    frame = pd.DataFrame(rows, index=[10, 20, 30])  # positions, not labels, are reported
    result = validate(frame)
    assert sorted(reason for reason, _ in result.row_failures[2]) == [
        "license_not_spdx",
        "namespace_unknown",
        "source_null",
        "text_empty",
    ]
    assert set(result.row_failures) == {2}


@EVALUATORS
def test_missing_column_fails_every_row(validate: Validate) -> None:
    table = docs_table(_rows(4)).drop_columns(["license"])
    result = validate(table)
    assert set(result.row_failures) == {0, 1, 2, 3}
    assert all(("license_missing", {"column": "license"}) in f for f in result.row_failures.values())
    assert result.suite["missing_columns"] == ["license"]


@EVALUATORS
def test_empty_table(validate: Validate) -> None:
    result = validate(docs_table([]))
    assert result.row_failures == {} and result.suite["rows"] == 0


def _comparable(result: ValidationResult) -> tuple:
    return result.row_failures, {k: v for k, v in result.suite.items() if k != "seconds"}


def _edge_rows() -> list[dict]:
    """Every rule's edge cases: nulls, whitespace of every kind, anchors before a newline, case, repeats."""
    rows = _rows(24)
    edits = [
        {"text": "\u00a0\u2003"},  # Unicode spaces only: \S finds nothing
        {"text": "\n\t x"},
        {"text": ""},
        {"license": "MIT\n"},  # $ matches before a final newline (re.search)
        {"license": "MIT OR"},
        {"license": "(MIT OR Apache-2.0) WITH Classpath-exception-2.0"},
        {"license": " MIT"},
        {"license": ""},
        {"namespace": "Cloud"},
        {"namespace": ""},
        {"namespace": "on_device"},
        {"source": " "},
        {"source": None},
        {"doc_id": None},
        {"doc_id": None},  # two nulls are not a duplicate
        {"doc_id": "same"},
        {"doc_id": "same"},
        {"doc_id": "same"},  # every occurrence of a repeat fails
        {"text": None, "license": None, "namespace": None, "source": None},
        {"text": "x" * 500, "license": "not a licence " * 30},  # long values are cut in details
    ]
    for row, edit in zip(rows, edits, strict=False):
        row.update(edit)
    return rows


def test_native_evaluation_matches_great_expectations_on_every_edge_case() -> None:
    rows = _edge_rows()
    table = _loose_table(rows)
    native, reference = validate_records(table), gx_validate_records(table)
    assert _comparable(native) == _comparable(reference)
    assert len(native.row_failures) >= 15  # the cases do fail: the comparison is not of two empty results
    # a pandas frame with NaN for missing values and a non-string value: the same answers again
    frame = pd.DataFrame(rows, index=range(100, 124))
    frame.loc[101, "license"] = math.nan
    frame["source"] = frame["source"].astype(object)
    frame.loc[102, "source"] = 7
    assert _comparable(validate_records(frame)) == _comparable(gx_validate_records(frame))
    # a column missing: the other rules still agree
    dropped = table.drop_columns(["namespace"])
    assert _comparable(validate_records(dropped)) == _comparable(gx_validate_records(dropped))


def test_the_suite_builds_in_great_expectations_with_every_rule() -> None:
    suite = gx_suite()
    assert [e.expectation_type for e in suite.expectations] == [rule.expectation_type for rule in RULES]
    assert [e.meta["reason"] for e in suite.expectations] == [rule.reason for rule in RULES]


def test_validating_records_does_not_import_great_expectations() -> None:
    code = (
        "import sys\nfrom fm_assets.transforms.text.validate import validate_records\n"
        "from fm_assets.engine.schemas import docs_table\nvalidate_records(docs_table([]))\n"
        "print('great_expectations' in sys.modules, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "False"
