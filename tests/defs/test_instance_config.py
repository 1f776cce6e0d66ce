"""One local instance whichever command runs first: `fm run` (and so `make demo`) and `make ui`
(``python -m fm_assets.defs.instance``) install the same deploy/local/dagster.yaml (run queue, one release at a
time, pools, run monitoring), older `fm run` configs are upgraded, a user's own file is kept; and the runs of
a killed `fm run` do not hold pool slots forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from fm_assets.cli.runner import dagster_instance
from fm_assets.defs.cli_runs import LAUNCHED_BY_CLI, LAUNCHED_BY_TAG
from fm_assets.defs.instance import (
    LEGACY_MINIMAL_CONFIG,
    LEGACY_RUNNER_CONFIG,
    LOCAL_INSTANCE_TEMPLATE,
    render_instance_config,
)
from fm_assets.defs.jobs import RELEASE_RUN_TAG_KEY, RELEASE_RUN_TAG_VALUE
from fm_assets.settings import load_settings

MAKE_UI_INSTALL = [sys.executable, "-m", "fm_assets.defs.instance"]  # what `make ui` runs before dagster dev


def assert_full_local_instance(home: Path) -> None:
    assert (home / "dagster.yaml").read_text() == render_instance_config(LOCAL_INSTANCE_TEMPLATE, home)
    with DagsterInstance.from_config(str(home)) as instance:
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None and queue.max_concurrent_runs == 2
        assert {"key": RELEASE_RUN_TAG_KEY, "value": RELEASE_RUN_TAG_VALUE, "limit": 1} in (
            queue.tag_concurrency_limits
        )
        assert instance.global_op_concurrency_default_limit == 1
        assert instance.run_monitoring_enabled
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert type(instance.event_log_storage).__name__ == "LocalSqliteEventLogStorage"


@pytest.mark.parametrize("earlier", [None, LEGACY_MINIMAL_CONFIG, LEGACY_RUNNER_CONFIG])
def test_fm_run_then_make_ui_gives_the_full_instance(fm_env, earlier):
    home = Path(os.environ["DAGSTER_HOME"])
    if earlier is None:
        (home / "dagster.yaml").unlink()
    else:  # a DAGSTER_HOME an older `fm run` set up
        (home / "dagster.yaml").write_text(render_instance_config(earlier, home))
    dagster_instance(load_settings()).dispose()  # what `fm run` opens
    assert_full_local_instance(home)
    subprocess.run([*MAKE_UI_INSTALL, str(home)], check=True, capture_output=True)
    assert_full_local_instance(home)


def test_make_ui_then_fm_run_gives_the_same_instance(fm_env):
    home = Path(os.environ["DAGSTER_HOME"])
    (home / "dagster.yaml").unlink()
    subprocess.run([*MAKE_UI_INSTALL, str(home)], check=True, capture_output=True)
    dagster_instance(load_settings()).dispose()
    assert_full_local_instance(home)


def test_a_users_own_config_is_kept(fm_env):
    home = Path(os.environ["DAGSTER_HOME"])
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    dagster_instance(load_settings()).dispose()
    subprocess.run([*MAKE_UI_INSTALL, str(home)], check=True, capture_output=True)
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


POOLED_RUN = """
import sys, time
from dagster import DagsterInstance, job, op
from fm_assets.defs.cli_runs import cli_run_tags

@op(pool="spark")
def hold_the_pool():
    print("claimed", flush=True)
    time.sleep(600)

@job
def pooled():
    hold_the_pool()

with DagsterInstance.from_config(sys.argv[1]) as instance:
    pooled.execute_in_process(instance=instance, tags=cli_run_tags())
"""


def test_a_killed_fm_runs_run_is_failed_and_its_pool_slot_freed(fm_env, tmp_path):
    """An `fm run` killed mid-step (kill -9) leaves its run STARTED and its pool slot claimed, which nothing
    frees without a daemon: the next `fm run` fails that run and frees the slot."""
    home = Path(os.environ["DAGSTER_HOME"])
    dagster_instance(load_settings()).dispose()
    script = tmp_path / "pooled.py"
    script.write_text(POOLED_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(home)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "claimed"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs(RunsFilter(tags={LAUNCHED_BY_TAG: LAUNCHED_BY_CLI}))
        assert run.status == DagsterRunStatus.STARTED
        assert [s.run_id for s in instance.event_log_storage.get_concurrency_info("spark").claimed_slots] == [
            run.run_id
        ]
    started = time.monotonic()
    instance = dagster_instance(load_settings())  # the next `fm run`
    try:
        failed = instance.get_run_by_id(run.run_id)
        assert failed is not None and failed.status == DagsterRunStatus.FAILURE
        assert instance.event_log_storage.get_concurrency_info("spark").claimed_slots == []
        assert time.monotonic() - started < 30
    finally:
        instance.dispose()
