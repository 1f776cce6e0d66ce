"""Great Expectations record validation reports every failing row with its reason."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from fm_assets.engine.schemas import DOC_SCHEMA, docs_table, make_doc_id
from fm_assets.transforms.text.validate import validate_records


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


def test_clean_table_passes() -> None:
    result = validate_records(docs_table(_rows(50)))
    assert result.row_failures == {} and result.success
    assert result.suite["rows"] == 50 and all(e["success"] for e in result.suite["expectations"])


def test_each_rule_flags_exactly_its_rows() -> None:
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
    result = validate_records(_loose_table(rows))
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


def test_row_can_fail_several_rules_and_pandas_input_works() -> None:
    rows = _rows(3)
    rows[2].update(text="", license="???", namespace="elsewhere", source=None)
    frame = pd.DataFrame(rows, index=[10, 20, 30])  # positions, not labels, are reported
    result = validate_records(frame)
    assert sorted(reason for reason, _ in result.row_failures[2]) == [
        "license_not_spdx",
        "namespace_unknown",
        "source_null",
        "text_empty",
    ]
    assert set(result.row_failures) == {2}


def test_missing_column_fails_every_row() -> None:
    table = docs_table(_rows(4)).drop_columns(["license"])
    result = validate_records(table)
    assert set(result.row_failures) == {0, 1, 2, 3}
    assert all(("license_missing", {"column": "license"}) in f for f in result.row_failures.values())
    assert result.suite["missing_columns"] == ["license"]


def test_empty_table() -> None:
    result = validate_records(docs_table([]))
    assert result.row_failures == {} and result.suite["rows"] == 0
