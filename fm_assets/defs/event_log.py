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

Every run gets its own database (``<run_id>.db``), and Dagster initialises each one with ``create_all`` and
an alembic stamp: ~0.3 s per run, twice per `fm run` (preprocess and release). Here the first run shard of a
process is initialised that way into a template (``.templates/run-shard-<dagster version>.db`` under the
base dir: not a ``*.db`` of the base dir, so never taken for a run) and every new run shard is a copy of it,
placed with ``os.link`` so an existing shard is never overwritten.

Configured in ``deploy/local/dagster.yaml``::

    event_log_storage:
      module: fm_assets.defs.event_log
      class: LocalSqliteEventLogStorage
      config:
        base_dir: ...
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dagster._core.event_api import EventHandlerFn
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
    SqliteEventLogStorageWatchdog,
)
from dagster.version import __version__ as DAGSTER_VERSION
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine
from watchdog.events import FileSystemEvent, PatternMatchingEventHandler
from watchdog.observers import Observer


def _fast_commits(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _stamped(conn: Connection) -> bool:
    """Whether this database carries an alembic revision (Dagster stamps a shard after creating its tables)."""
    if not inspect(conn).has_table("alembic_version"):
        return False
    return conn.execute(text("SELECT count(*) FROM alembic_version")).scalar_one() > 0


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
        self._tables_seen: set[str] = set()
        self._index_was_unstamped = False
        super().__init__(base_dir, inst_data)
        self._finish_index_shard()

    def _finish_index_shard(self) -> None:
        """Complete an index shard whose creation was interrupted. Dagster creates it only when its file does
        not exist, one table at a time and then the alembic stamp: a process killed in between (kill -9 early
        in a root's first `fm run`) left a file with some tables and no stamp, which every later process took
        as created and failed on ("requires the dynamic partitions table"). Unstamped here means exactly that
        (a shard Dagster finished is stamped), so the missing tables are created, the shard is stamped at head
        and the data migrations a new shard gets are applied."""
        self._engine(INDEX_SHARD_NAME)  # its first use: _initdb creates the missing tables and stamps
        if self._index_was_unstamped:
            self.reindex_events()
            self.reindex_assets()

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        if engine.url.database == self.path_for_shard(INDEX_SHARD_NAME):
            with engine.connect() as conn:
                self._index_was_unstamped = not _stamped(conn)
        super()._initdb(engine, for_index_shard)

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> LocalSqliteEventLogStorage:  # type: ignore[override]
        return cls(inst_data=inst_data, **config_value)

    def _new_engine(self, conn_string: str) -> Engine:
        engine = create_engine(  # pooled: closing a WAL database's last connection checkpoints it
            conn_string,
            pool_size=1,
            max_overflow=4,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
        )
        event.listen(engine, "connect", _fast_commits)
        return engine

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.get(shard)
        if engine is None:
            engine = self._new_engine(self.conn_string_for_shard(shard))
            if shard not in self._initialized_dbs:
                if shard == INDEX_SHARD_NAME or not self._copy_run_shard_template(shard):
                    self._initdb(engine)
                self._initialized_dbs.add(shard)
            self._engines[shard] = engine
        return engine

    def _template_path(self) -> Path:
        return Path(self._base_dir) / ".templates" / f"run-shard-{DAGSTER_VERSION}.db"

    def _copy_run_shard_template(self, shard: str) -> bool:
        """Place a copy of the initialised empty run shard as ``shard``'s database, unless it exists already
        (then Dagster's own check runs on it); False when there is no template to copy and none was made."""
        target = Path(self.path_for_shard(shard))
        if target.exists():
            return False
        template = self._template_path()
        if not template.exists():
            template.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=template.parent, suffix=".db.tmp")
            os.close(fd)
            os.unlink(name)  # sqlite creates it
            engine = self._new_engine(f"sqlite:///{name}")
            try:
                self._initdb(engine)
            finally:
                engine.dispose()  # the last connection closes: the WAL is checkpointed into the file
            os.replace(name, template)
        fd, name = tempfile.mkstemp(dir=template.parent, suffix=".db.tmp")
        os.close(fd)
        try:
            shutil.copyfile(template, name)
            try:
                os.link(name, target)  # never over a shard another process created meanwhile
            except FileExistsError:
                return False
        finally:
            os.unlink(name)
        return True

    def has_table(self, table_name: str) -> bool:
        """Whether the index shard has ``table_name``. Dagster asks before most event writes (asset event
        tags, check executions, ...: ~150 times in a one-batch run), and its own builds an engine and a
        connection each time. Tables are only ever added (by a migration), so one seen is remembered; one not
        there yet is asked for again."""
        if table_name in self._tables_seen:
            return True
        with self._engine(INDEX_SHARD_NAME).connect() as conn:
            found = bool(conn.dialect.has_table(conn, table_name))
        if found:
            self._tables_seen.add(table_name)
        return found

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
