"""Runs that `fm run` executes in its own process, and what is left of them when that process dies.

`fm run` executes the preprocess and release jobs in-process on the same instance as the daemon and the UI
(same run queue config, pools and run history). A daemon-launched run that dies is failed by run monitoring
and its pool slots are freed; nothing watches an in-process run, so a killed `fm run` (kill -9, out of
memory, a reboot) would leave its run STARTED forever and the pool slots of its running step claimed, and
the next run needing that pool would wait for them. Its runs therefore carry the process that runs them
(host and pid), and the next `fm run` fails the ones whose process is gone and frees their slots, as run
monitoring does for launched runs. A pid reused by another process before that keeps the stale run until
that process ends (rare; never a wrong release, only a wait).
"""

from __future__ import annotations

import logging
import os
import socket

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

log = logging.getLogger(__name__)

LAUNCHED_BY_TAG = "fm/launched_by"
LAUNCHED_BY_CLI = "fm run"
HOST_TAG = "fm/host"
PID_TAG = "fm/pid"
UNFINISHED = [DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]


def cli_run_tags() -> dict[str, str]:
    """Tags of a run this process executes in-process."""
    return {LAUNCHED_BY_TAG: LAUNCHED_BY_CLI, HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def reclaim_dead_cli_runs(instance: DagsterInstance) -> list[str]:
    """Fail the unfinished runs whose `fm run` process on this host is gone and free their pool slots;
    returns their run ids."""
    host = socket.gethostname()
    reclaimed = []
    for run in instance.get_runs(RunsFilter(statuses=UNFINISHED, tags={LAUNCHED_BY_TAG: LAUNCHED_BY_CLI})):
        pid = run.tags.get(PID_TAG, "")
        if run.tags.get(HOST_TAG) != host or not pid.isdigit() or process_alive(int(pid)):
            continue
        message = (
            f"the `fm run` process (pid {pid}) running this run is gone (killed?); its pool slots are freed"
        )
        instance.report_run_failed(run, message)
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        log.warning("run %s: %s", run.run_id, message)
        reclaimed.append(run.run_id)
    return reclaimed
