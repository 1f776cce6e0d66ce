"""A sensor run as users watch it: a real ``dagster-daemon`` and ``dagster-webserver``, a batch of several work
units landed while they run, the units on a pool of 2 worker processes.

* The run page updates live: ``watch()`` on the instance's event log (what the page subscribes to) delivers
  the run's events while it runs, and headless Chromium on ``/runs/<id>`` sees RUN_SUCCESS without a reload.
* The run's processes go away: every process of the run worker's tree (the worker, its fork server, the pool
  workers: ~1.9 GB per run when they stayed) has exited within seconds of the run's end.
"""

from __future__ import annotations

import re
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
class RunTree:
    """Samples a run worker's process tree (the worker, its fork server, the pool workers) while it lives:
    every pid seen, and the tree's largest total RSS."""

    root: int
    seen: dict[int, str] = field(default_factory=dict)  # pid -> cmdline
    peak_rss_mb: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)

    def alive(self) -> dict[int, float]:
        """pid -> RSS (MB) of every process seen in the tree that is still alive (zombies excluded)."""
        rss = {}
        for pid in list(self.seen):
            try:
                proc = psutil.Process(pid)
                if proc.status() != psutil.STATUS_ZOMBIE:
                    rss[pid] = proc.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                continue
        return rss

    def sample(self) -> None:
        try:
            root = psutil.Process(self.root)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        total = 0.0
        for proc in procs:
            try:
                if proc.pid not in self.seen:
                    self.seen[proc.pid] = " ".join(proc.cmdline())[:200]
                total += proc.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                continue
        self.peak_rss_mb = max(self.peak_rss_mb, total)

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            time.sleep(0.3)


def run_worker_pid(stack: DagsterStack, run_id: str) -> int | None:
    """The pid of the process executing the run's steps (its "Executing steps in process" engine event)."""
    for message in stack.engine_messages(run_id):
        found = re.search(r"Executing steps in process \(pid: (\d+)\)", message)
        if found:
            return int(found.group(1))
    return None


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
    stack.start_daemon()
    stack.start_webserver()
    stack.wait_for_webserver()
    stack.wait_for_daemons()

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

    worker = stack.wait_for("the run worker", lambda: run_worker_pid(stack, run.run_id), 600, 0.5)
    tree = RunTree(worker)
    tree.sample()
    threading.Thread(target=tree.run, daemon=True).start()
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

    # every process of the run (worker, fork server, pool workers) is gone within seconds of its end
    record = stack.instance.get_run_record_by_id(run.run_id)
    assert record is not None and record.end_time is not None
    assert any("forkserver" in cmd for cmd in tree.seen.values()), tree.seen  # the units ran on the pool
    assert len(tree.seen) >= 4, tree.seen  # worker + fork server + 2 pool workers
    while time.time() < record.end_time + EXIT_SECONDS and tree.alive():
        time.sleep(0.5)
    tree.stop.set()
    left = tree.alive()
    print(
        f"run tree: {len(tree.seen)} processes, peak {tree.peak_rss_mb:.0f} MB; "
        f"{len(left)} alive ({sum(left.values()):.0f} MB) {time.time() - record.end_time:.1f}s after the run's end"
    )
    assert not left, (
        f"{len(left)} processes ({sum(left.values()):.0f} MB) of run {run.run_id} alive {EXIT_SECONDS}s after its "
        f"end: {[tree.seen[pid] for pid in left]}"
    )
    assert not any(cmd.startswith("tail ") or "watch_orphans" in cmd for cmd in tree.seen.values()), tree.seen

    # the run's stderr, captured by the instance's compute-log manager (a thread, no tail), is on its page
    page.get_by_role("button", name="stderr").click()
    page.get_by_placeholder(re.compile("^Select a step")).click()
    page.get_by_role("menuitem").first.click()  # in-process steps share one log: any step shows it
    expect(page.get_by_text("STEP_START").first).to_be_visible(timeout=60_000)
    shots.take(page, "run-page-stderr")


def _count(delivered: list[tuple[float, EventLogEntry]], event_type: DagsterEventType) -> int:
    return sum(1 for _, e in delivered if e.dagster_event and e.dagster_event.event_type == event_type)
