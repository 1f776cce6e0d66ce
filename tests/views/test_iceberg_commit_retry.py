"""A commit that loses Iceberg's optimistic check to another writer is re-planned and retried, on a real
SQLite-backed catalog; a writer that keeps losing gets a clear error."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from fm_assets.datasets.views import TABLE_PROPERTIES, CatalogConflictError, commit_with_retries


@pytest.fixture
def catalog(tmp_path) -> SqlCatalog:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("fm")
    schema = Schema(NestedField(1, "x", LongType(), required=False))
    catalog.create_table("fm.t", schema, properties=TABLE_PROPERTIES)  # as curated_table() creates it
    return catalog


def rows(*values: int) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())})


def test_lost_commit_is_replanned_on_the_new_state(catalog):
    stale = catalog.load_table("fm.t")
    catalog.load_table("fm.t").append(rows(1))  # the concurrent writer commits a snapshot first

    def attempt(n: int) -> int:
        table = stale if n == 0 else catalog.load_table("fm.t")
        table.append(rows(2, 3))
        return n

    assert commit_with_retries(attempt, "fm.t") == 1
    table = catalog.load_table("fm.t")
    assert sorted(table.scan().to_arrow()["x"].to_pylist()) == [1, 2, 3]  # neither commit lost
    assert len(table.snapshots()) == 2


def test_a_writer_that_keeps_losing_gets_a_clear_error(catalog):
    stale = catalog.load_table("fm.t")
    catalog.load_table("fm.t").append(rows(1))

    def always_stale(n: int) -> None:
        stale.append(rows(n))

    with pytest.raises(CatalogConflictError, match="3 commits in a row lost to concurrent writers"):
        commit_with_retries(always_stale, "fm.t", attempts=3)
