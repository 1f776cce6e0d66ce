"""An index shard whose creation was interrupted (kill -9 early in a root's first run) is completed when the
event log is next opened, instead of failing every later run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
from sqlalchemy import create_engine

from fm_assets.defs.event_log import LocalSqliteEventLogStorage

CREATED_BEFORE_THE_KILL = ("event_logs", "secondary_indexes", "asset_keys")


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_a_half_created_index_shard_is_finished(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    engine = create_engine(f"sqlite:///{index}")
    for name in CREATED_BEFORE_THE_KILL:  # what a killed first run left: some tables, no alembic stamp
        SqlEventLogStorageMetadata.tables[name].create(engine)
    engine.dispose()
    assert "dynamic_partitions" not in tables(index)

    storage = LocalSqliteEventLogStorage(str(tmp_path))
    try:
        assert storage.get_dynamic_partitions("batches") == []  # raised before: no dynamic partitions table
        storage.add_dynamic_partitions("batches", ["b1"])
        assert storage.get_dynamic_partitions("batches") == ["b1"]
    finally:
        storage.dispose()
    assert set(SqlEventLogStorageMetadata.tables) <= tables(index)
    with sqlite3.connect(index) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone()[0] == 1


def test_a_new_and_a_finished_shard_open_as_before(tmp_path: Path) -> None:
    for _ in range(2):  # created, then reopened
        storage = LocalSqliteEventLogStorage(str(tmp_path))
        storage.add_dynamic_partitions("batches", ["b1"])
        assert storage.get_dynamic_partitions("batches") == ["b1"]
        storage.dispose()
    assert set(SqlEventLogStorageMetadata.tables) <= tables(tmp_path / "index.db")
