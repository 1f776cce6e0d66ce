"""A local SQLite event log that keeps up with a run: Dagster's own ``SqliteEventLogStorage`` with one engine
per database instead of one per event, and WAL commits without an fsync each.

Dagster's class builds a SQLAlchemy engine, connects, commits (an fsync in WAL's default ``synchronous=FULL``)
and disposes for every event: about 10 ms each, more than half of Dagster's own time in a run of cache hits.
Here engines are kept per shard with a small connection pool (closing a WAL database's last connection
checkpoints it, another few ms per event; other processes still see every commit at once) and connections
run ``PRAGMA synchronous=NORMAL``: in WAL mode a commit is still atomic and
the database cannot be corrupted; only the last commits before a power loss (not a process crash) can be
lost, which is acceptable for a single machine's run history. Production uses Postgres (deploy/dagster.yaml).

A pooled connection is not closed after a commit, so the commit stays in ``<run_id>.db-wal`` until an
auto-checkpoint; Dagster's ``watch()`` (what the UI's live run page subscribes to) listens for changes of
``<run_id>.db`` only and would see a run's events late or never. ``watch()`` here listens to both files, so a
subscriber gets every commit as it happens, from this process or any other.

Configured in ``deploy/local/dagster.yaml``::

    event_log_storage:
      module: fm_assets.defs.event_log
      class: LocalSqliteEventLogStorage
      config:
        base_dir: ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from dagster._core.event_api import EventHandlerFn
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
    SqliteEventLogStorageWatchdog,
)
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from watchdog.events import FileSystemEvent, PatternMatchingEventHandler
from watchdog.observers import Observer


def _fast_commits(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class WalWatchdog(SqliteEventLogStorageWatchdog):
    """Dagster's per-run watchdog, listening to ``<run_id>.db-wal`` (where pooled commits land) as well as
    ``<run_id>.db`` (written at a checkpoint)."""

    def __init__(
        self, storage: SqliteEventLogStorage, run_id: str, callback: EventHandlerFn, cursor: str | None
    ) -> None:
        super().__init__(storage, run_id, callback, cursor)
        PatternMatchingEventHandler.__init__(self, patterns=[self._log_path, f"{self._log_path}-wal"])

    def on_modified(self, event: FileSystemEvent) -> None:
        self._process_log()

    def on_created(self, event: FileSystemEvent) -> None:
        self._process_log()


class LocalSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` with an engine cache and WAL commits without fsync (see the module doc)."""

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._engines: dict[str, Engine] = {}
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> LocalSqliteEventLogStorage:  # type: ignore[override]
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.get(shard)
        if engine is None:
            engine = create_engine(  # pooled: closing a WAL database's last connection checkpoints it
                self.conn_string_for_shard(shard),
                pool_size=1,
                max_overflow=4,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
            )
            event.listen(engine, "connect", _fast_commits)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            self._engines[shard] = engine
        return engine

    @contextlib.contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:  # type: ignore[override]
        with self._db_lock, self._engine(shard).connect() as conn, conn.begin():
            yield conn

    def watch(self, run_id: str, cursor: str | None, callback: EventHandlerFn) -> None:
        if not self._obs:
            self._obs = Observer()
            self._obs.start()
        handler = WalWatchdog(self, run_id, callback, cursor)
        self._watchers[run_id][callback] = (
            handler,
            self._obs.schedule(handler, self._base_dir, recursive=True),
        )

    def delete_events_for_run(self, run_id: str) -> None:
        engine = self._engines.pop(run_id, None)
        if engine is not None:
            engine.dispose()
        super().delete_events_for_run(run_id)

    def dispose(self) -> None:
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()
        super().dispose()
