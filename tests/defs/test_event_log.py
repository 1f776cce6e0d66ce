"""The local event log (fm_assets.defs.event_log) as `fm run` installs it: a real instance records a run's
events, another process reads them back at once, and connections commit without fsync in WAL mode."""

from __future__ import annotations

import subprocess
import sys

from dagster import DagsterInstance, job, op

from fm_assets.defs.event_log import LocalSqliteEventLogStorage
from fm_assets.defs.instance import LEGACY_MINIMAL_CONFIG, runner_instance_config


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
    runner_instance_config(home)
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


def test_an_existing_user_config_is_kept(tmp_path):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    runner_instance_config(tmp_path)
    assert (tmp_path / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"
