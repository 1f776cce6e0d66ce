"""The per-batch Lance sync: a release writes only the batches whose version changed, and a sync that dies
between its steps is repaired by the next one (no batch twice, none lost)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from fm_assets.datasets.lance_sync import VERSIONS_KEY, LanceView, sync_lance_batches

SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("batch", pa.string(), nullable=False),
        pa.field("n", pa.int64()),
    ]
)
LAYOUT = "test-v1"


class Rows:
    """Rows of each batch (as many as its version's number, ``n`` = that number); records what was asked."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []
        self.wanted: dict[str, str] = {}

    def __call__(self, batches: list[str]):
        self.asked.append(list(batches))
        for batch in batches:
            n = int(self.wanted[batch])
            yield pa.RecordBatch.from_pydict(
                {"doc_id": [f"{batch}-{i}" for i in range(n)], "batch": [batch] * n, "n": [n] * n},
                schema=SCHEMA,
            )


def sync(uri: str, rows: Rows, wanted: dict[str, str], layout: str = LAYOUT):
    rows.wanted = wanted
    return sync_lance_batches(LanceView(uri, None, SCHEMA, layout, rows), wanted)


def held(uri: str) -> Counter:
    """(batch, n) -> rows: what the dataset holds, duplicates visible."""
    table = lance.dataset(uri).to_table()
    return Counter(zip(table["batch"].to_pylist(), table["n"].to_pylist(), strict=True))


def expected(wanted: dict[str, str]) -> Counter:
    return Counter({(batch, int(v)): int(v) for batch, v in wanted.items()})


def test_a_release_writes_only_new_changed_and_removed_batches(tmp_path: Path):
    uri, rows = str(tmp_path / "docs.lance"), Rows()
    first = sync(uri, rows, {"a": "2", "b": "3"})
    assert first.rewritten_whole and held(uri) == expected({"a": "2", "b": "3"})

    added = sync(uri, rows, {"a": "2", "b": "3", "c": "4"})
    assert rows.asked[-1] == ["c"] and added.batches_written == ("c",) and not added.rewritten_whole
    assert held(uri) == expected({"a": "2", "b": "3", "c": "4"}) and added.rows == 9

    changed = sync(uri, rows, {"a": "5", "b": "3", "c": "4"})
    assert rows.asked[-1] == ["a"] and changed.batches_written == ("a",)
    assert held(uri) == expected({"a": "5", "b": "3", "c": "4"})

    asked = len(rows.asked)
    removed = sync(uri, rows, {"a": "5", "c": "4"})
    assert len(rows.asked) == asked and removed.batches_removed == ("b",)
    assert held(uri) == expected({"a": "5", "c": "4"})

    same = sync(uri, rows, {"a": "5", "c": "4"})
    assert not same.written and same.version == removed.version and len(rows.asked) == asked


def test_a_sync_that_died_after_appending_is_repaired_by_the_next(tmp_path: Path, monkeypatch):
    uri, rows = str(tmp_path / "docs.lance"), Rows()
    sync(uri, rows, {"a": "2"})
    real = lance.LanceDataset.update_schema_metadata
    calls = []

    def dies_on_the_final_record(self, values, **kwargs):
        calls.append(values)
        if len(calls) == 2:  # the first records the pending batches, the second the final versions
            raise OSError("killed")
        return real(self, values, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "update_schema_metadata", dies_on_the_final_record)
    with pytest.raises(OSError, match="killed"):
        sync(uri, rows, {"a": "3", "b": "2"})
    monkeypatch.setattr(lance.LanceDataset, "update_schema_metadata", real)
    assert held(uri) == expected({"a": "3", "b": "2"})  # appended, but not recorded as done

    repaired = sync(uri, rows, {"a": "3", "b": "2"})
    assert sorted(repaired.batches_written) == ["a", "b"]  # the pending ones, written again
    assert held(uri) == expected({"a": "3", "b": "2"})  # each once
    again = sync(uri, rows, {"a": "3", "b": "2"})
    assert not again.written


def test_a_new_layout_or_a_dataset_without_the_record_is_rewritten_whole(tmp_path: Path):
    uri, rows = str(tmp_path / "docs.lance"), Rows()
    legacy = SCHEMA.with_metadata({"fm.inputs_version": "x"})
    table = pa.table({"doc_id": ["old"], "batch": ["z"], "n": [1]}, schema=legacy)
    lance.write_dataset(pa.RecordBatchReader.from_batches(legacy, table.to_batches()), uri, schema=legacy)
    assert VERSIONS_KEY.encode() not in lance.dataset(uri).schema.metadata

    whole = sync(uri, rows, {"a": "2"})
    assert whole.rewritten_whole and held(uri) == expected({"a": "2"})
    relaid = sync(uri, rows, {"a": "2"}, layout="test-v2")
    assert relaid.rewritten_whole and held(uri) == expected({"a": "2"})
    assert not sync(uri, rows, {"a": "2"}, layout="test-v2").written
