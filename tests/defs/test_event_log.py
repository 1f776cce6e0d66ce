"""The local event log (fm_assets.defs.event_log) as `fm run` installs it: a real instance records a run's
events, another process reads them back at once, and connections commit without fsync in WAL mode."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from dagster import DagsterEventType, DagsterInstance, EventLogEntry, job, op
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME
from dagster._core.utils import make_new_run_id

from fm_assets.defs.event_log import LocalSqliteEventLogStorage
from fm_assets.defs.instance import LEGACY_MINIMAL_CONFIG, ensure_instance_config


@op
def emit() -> int:
    return 1


@job
def tiny():
    emit()


def test_runs_are_recorded_and_readable_from_another_process(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LEGACY_MINIMAL_CONFIG)  # what older `fm run`s left: upgraded
    ensure_instance_config(home)
    with DagsterInstance.from_config(str(home)) as instance:
        assert isinstance(instance.event_log_storage, LocalSqliteEventLogStorage)
        result = tiny.execute_in_process(instance=instance)
        assert result.success
        ours = len(instance.all_logs(result.run_id))
        with instance.event_log_storage.run_connection(result.run_id) as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        code = (
            "import sys; from dagster import DagsterInstance; "
            f"i = DagsterInstance.from_config({str(home)!r}); print(len(i.all_logs({result.run_id!r})))"
        )
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ours > 5
    assert int(other.stdout.strip()) == ours


STEP_SEEN = threading.Event()  # set by the watcher when it sees the step start


@op
def wait_until_watched() -> int:
    """Runs only as long as the watcher needs to see this step start (it fails after 20 s if it never does)."""
    return int(STEP_SEEN.wait(20))


@job
def watched():
    wait_until_watched()


def test_watch_delivers_a_runs_events_while_it_runs(tmp_path):
    """What the UI's live run page subscribes to: ``watch()`` on another storage object over the same files.
    The writer keeps its pooled connection open, so its commits stay in ``<run_id>.db-wal``; the watcher must
    see them there, while the run is running, not when a checkpoint or a page reload happens."""
    home = tmp_path / "home"
    ensure_instance_config(home)
    run_id = make_new_run_id()
    delivered: list[EventLogEntry] = []

    def on_event(entry: EventLogEntry, _cursor: str) -> None:
        delivered.append(entry)
        if entry.dagster_event is not None and entry.dagster_event.event_type == DagsterEventType.STEP_START:
            STEP_SEEN.set()

    with DagsterInstance.from_config(str(home)) as watcher, DagsterInstance.from_config(str(home)) as writer:
        watcher.event_log_storage.watch(run_id, None, on_event)
        try:
            result = watched.execute_in_process(instance=writer, run_id=run_id)
            assert result.success
            assert result.output_for_node("wait_until_watched") == 1, "the watcher never saw the step start"
            stored = writer.all_logs(run_id)
            deadline = time.monotonic() + 10
            while len(delivered) < len(stored) and time.monotonic() < deadline:
                time.sleep(0.1)  # the writer is still open: nothing has checkpointed its WAL
        finally:
            watcher.event_log_storage.end_watch(run_id, on_event)
    types = [e.dagster_event.event_type for e in delivered if e.dagster_event is not None]
    assert len(delivered) == len(stored) > 5
    assert types[-1] == DagsterEventType.RUN_SUCCESS


def test_an_existing_user_config_is_kept(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    ensure_instance_config(tmp_path)
    assert (tmp_path / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


def test_new_run_shards_are_copies_of_one_initialised_template(tmp_path, monkeypatch):
    home = tmp_path / "home"
    ensure_instance_config(home)
    with DagsterInstance.from_config(str(home)) as instance:
        first = tiny.execute_in_process(instance=instance)
        storage = instance.event_log_storage
        assert isinstance(storage, LocalSqliteEventLogStorage)
        template = storage._template_path()
        assert template.is_file() and template.parent.parent == home / "history" / "runs"
    # another process: Dagster's per-database initialisation does not run for a new run's shard
    with DagsterInstance.from_config(str(home)) as instance:
        storage = instance.event_log_storage
        initialised: list[str] = []
        real_initdb = storage._initdb

        def recording_initdb(engine, *args, **kwargs):
            initialised.append(str(engine.url))
            return real_initdb(engine, *args, **kwargs)

        monkeypatch.setattr(storage, "_initdb", recording_initdb)
        second = tiny.execute_in_process(instance=instance)
        assert second.success
        assert not [url for url in initialised if second.run_id in url]  # copied, not initialised
        assert INDEX_SHARD_NAME in storage._initialized_dbs  # the index was checked when the storage opened
        assert {e.dagster_event_type for e in instance.all_logs(second.run_id)} >= {
            DagsterEventType.RUN_START,
            DagsterEventType.STEP_SUCCESS,
            DagsterEventType.RUN_SUCCESS,
        }
        assert len(instance.all_logs(first.run_id)) == len(instance.all_logs(second.run_id))
        assert second.run_id in {run.run_id for run in instance.get_runs()}
        with storage.run_connection(second.run_id) as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_table_checks_are_remembered_once_true_and_asked_again_while_false(tmp_path):
    storage = LocalSqliteEventLogStorage(str(tmp_path / "runs"))
    try:
        asked: list[str] = []
        real = storage._engine

        def counting(shard: str):
            asked.append(shard)
            return real(shard)

        storage._engine = counting  # type: ignore[method-assign]
        assert storage.has_table("asset_check_executions")  # a table Dagster creates
        assert storage.has_table("asset_check_executions")
        assert asked == [INDEX_SHARD_NAME]  # the second answer came from memory
        assert not storage.has_table("fm_added_later")
        with real(INDEX_SHARD_NAME).begin() as conn:  # a migration in another process adds it
            conn.exec_driver_sql("CREATE TABLE fm_added_later (id INTEGER)")
        assert storage.has_table("fm_added_later")  # a missing table is never remembered as missing
    finally:
        storage.dispose()
