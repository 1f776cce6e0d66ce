"""A sensor run as users watch it: a real ``dagster-daemon`` and ``dagster-webserver``, a batch of several work
units landed while they run, the units on a pool of 2 worker processes.

* The run page updates live: ``watch()`` on the instance's event log (what the page subscribes to) delivers
  the run's events while it runs, and headless Chromium on ``/runs/<id>`` sees RUN_SUCCESS without a reload.
* The run's processes go away: every process the run started (run worker, fork server, pool workers) has
  exited within seconds of the run's end, and the stack is back to its processes and memory from before.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from browser import Screenshots
from dagster import DagsterEventType, DagsterRunStatus, EventLogEntry
from dagster_stack import DagsterStack

from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(2400)]

EXIT_SECONDS = 15  # a finished run's processes are gone within this many seconds of its end


@dataclass
class ProcessWatch:
    """Samples every process in the stack's sessions (the daemon's and the webserver's process groups)."""

    sessions: set[int]
    seen: dict[int, tuple[float, str]] = field(default_factory=dict)  # pid -> (first seen, cmdline)
    stop: threading.Event = field(default_factory=threading.Event)

    def current(self) -> dict[int, psutil.Process]:
        procs = {}
        for proc in psutil.process_iter(["pid"]):
            try:
                if proc.status() != psutil.STATUS_ZOMBIE and os.getsid(proc.pid) in self.sessions:
                    procs[proc.pid] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
                continue
        return procs

    def rss_mb(self) -> float:
        total = 0
        for proc in self.current().values():
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total / 2**20

    def sample(self) -> None:
        for pid, proc in self.current().items():
            if pid not in self.seen:
                try:
                    self.seen[pid] = (time.time(), " ".join(proc.cmdline())[:300])
                except psutil.NoSuchProcess:
                    continue

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            time.sleep(0.3)


def test_a_sensor_run_streams_live_and_leaves_no_process_behind(
    dagster_stack: DagsterStack,
    sample_files: list[tuple[Path, str, str]],
    browser_page: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from playwright.sync_api import expect

    monkeypatch.setenv("FM_WORKERS", "2")  # the units run on the shared pool (the stack inherits this)
    monkeypatch.setenv("FM_LAND_ROWS_PER_PART", "10")
    monkeypatch.setenv("FM_NEAR_DEDUP", "false")  # no Spark: the pool is what this test is about
    stack, page = dagster_stack, browser_page
    shots = Screenshots(tmp_path / "screenshots")
    daemon = stack.start_daemon()
    webserver = stack.start_webserver()
    stack.wait_for_webserver()
    stack.wait_for_daemons()

    watch = ProcessWatch(sessions={daemon.popen.pid, webserver.popen.pid})
    time.sleep(5)  # code servers settled
    before = watch.current()
    before_rss = watch.rss_mb()
    watch.sample()
    sampler = threading.Thread(target=watch.run, daemon=True)
    sampler.start()

    # a batch of real documents: one package's files, several units per stage (FM_LAND_ROWS_PER_PART=10)
    path, source, licence = sample_files[-1]
    batch = land_batch(
        ObjectStore(str(stack.root)), path.parent, source=source, license_id=licence, namespace="cloud"
    ).batch
    (run,) = stack.wait_for(
        "the sensor's preprocess run",
        lambda: stack.runs(job_name="preprocess", tags={"dagster/partition": batch}),
        timeout=300,
        interval=1,
    )

    # subscribe the way the run page does, and open the page, before the run has done anything
    delivered: list[tuple[float, EventLogEntry]] = []
    stack.instance.event_log_storage.watch(
        run.run_id, None, lambda entry, _cursor: delivered.append((time.time(), entry))
    )
    page.goto(f"{stack.url}/runs/{run.run_id}")
    shots.take(page, "run-page-opened")

    # while the run is running, its step events reach the subscriber
    def live_steps() -> int | None:
        current = stack.instance.get_run_by_id(run.run_id)
        assert current is not None
        if current.status in {
            DagsterRunStatus.QUEUED,
            DagsterRunStatus.NOT_STARTED,
            DagsterRunStatus.STARTING,
        }:
            return None
        assert current.status == DagsterRunStatus.STARTED, (
            f"run ended {current.status.value} with {len(delivered)} events delivered to watch() "
            f"while it ran:\n{stack.failure_message(run.run_id)}"
        )
        return _count(delivered, DagsterEventType.STEP_SUCCESS) >= 2 or None

    stack.wait_for("two step successes delivered to watch() while the run runs", live_steps, 1500, 1)
    shots.take(page, "run-page-live")
    finished = stack.wait_for_run(run.run_id, timeout=1500)
    assert finished.status == DagsterRunStatus.SUCCESS

    # the page that was opened before the run's end shows its end, without a reload
    expect(page.get_by_text("RUN_SUCCESS", exact=True).first).to_be_visible(timeout=60_000)
    shots.take(page, "run-page-success-without-reload")
    stack.wait_for(
        "every stored event delivered to watch()",
        lambda: len(delivered) >= len(stack.instance.all_logs(run.run_id)) or None,
        timeout=30,
        interval=1,
    )
    assert DagsterEventType.RUN_SUCCESS in {
        e.dagster_event.event_type for _, e in delivered if e.dagster_event
    }

    # every process the run started is gone within seconds of its end
    record = stack.instance.get_run_record_by_id(run.run_id)
    assert record is not None and record.end_time is not None
    ended = record.end_time
    started_by_run = {
        pid: cmd for pid, (first, cmd) in watch.seen.items() if pid not in before and first <= ended
    }
    assert any("forkserver" in cmd for cmd in started_by_run.values()), started_by_run  # the pool was used
    deadline = ended + EXIT_SECONDS
    while time.time() < deadline and set(started_by_run) & set(watch.current()):
        time.sleep(0.5)
    left = {pid: started_by_run[pid] for pid in set(started_by_run) & set(watch.current())}
    assert not left, f"{len(left)} processes of run {run.run_id} alive {EXIT_SECONDS}s after its end: {left}"

    # once the release that follows has finished too, the stack is back to what it was before the batch
    (release,) = stack.wait_for(
        "the release run",
        lambda: stack.runs(job_name="release", tags={"dagster/run_key": f"release-after:{run.run_id}"}),
        timeout=300,
    )
    stack.wait_for_run(release.run_id, timeout=900)
    release_record = stack.instance.get_run_record_by_id(release.run_id)
    assert release_record is not None and release_record.end_time is not None
    stack.wait_for(
        "the stack's processes back to those before the batch",
        lambda: set(watch.current()) == set(before) or None,
        timeout=max(1.0, release_record.end_time + EXIT_SECONDS - time.time()),
        interval=0.5,
    )
    watch.stop.set()
    after_rss = watch.rss_mb()
    print(f"stack RSS before the batch {before_rss:.0f} MB, after both runs {after_rss:.0f} MB")
    assert after_rss < before_rss + 400  # a run worker alone is ~650 MB; only the code servers may grow


def _count(delivered: list[tuple[float, EventLogEntry]], event_type: DagsterEventType) -> int:
    return sum(1 for _, e in delivered if e.dagster_event and e.dagster_event.event_type == event_type)
