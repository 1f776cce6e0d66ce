"""Real Dagster processes for the UI tests: ``dagster-daemon run``, ``dagster-webserver`` or ``dagster dev`` on
loopback with the repository's workspace.yaml, a temporary DAGSTER_HOME holding deploy/local/dagster.yaml and
the test's FM_ROOT; polling through the instance and the webserver's GraphQL API, with log tails in every
failure message."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.storage.dagster_run import DagsterRun

from fm_assets.defs.instance import ensure_instance_config

REPO = Path(__file__).resolve().parents[2]
WORKSPACE = REPO / "workspace.yaml"
BIN = Path(sys.executable).parent
T = TypeVar("T")
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
FAILURE_EVENTS = {DagsterEventType.RUN_FAILURE, DagsterEventType.STEP_FAILURE, DagsterEventType.ENGINE_EVENT}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 60) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the whole process group (code servers, run workers, Spark JVMs), SIGKILL if it lingers;
        the group is killed even when its leader is already gone."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)


@dataclass
class DagsterStack:
    home: Path
    root: Path
    logs: Path
    port: int = field(default_factory=free_port)
    procs: list[Proc] = field(default_factory=list)
    _instance: DagsterInstance | None = None

    @classmethod
    def create(cls, home: Path, root: Path, logs: Path) -> DagsterStack:
        ensure_instance_config(home)  # replaces the minimal dagster.yaml the fm_env fixture writes
        logs.mkdir(parents=True, exist_ok=True)
        return cls(home=home, root=root, logs=logs)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DAGSTER_HOME": str(self.home),
            "FM_ROOT": str(self.root),
            "DAGSTER_DISABLE_TELEMETRY": "1",
            "GX_ANALYTICS_ENABLED": "false",
            "FM_PROGRESS": "0",
            "PYTHONUNBUFFERED": "1",
        }

    def start(self, name: str, *args: str) -> Proc:
        log = self.logs / f"{name}.log"
        handle = log.open("wb")
        popen = subprocess.Popen(
            [str(BIN / args[0]), *args[1:]],
            cwd=REPO,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so teardown reaches every child
        )
        handle.close()
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def start_daemon(self) -> Proc:
        return self.start("daemon", "dagster-daemon", "run", "-w", str(WORKSPACE))

    def start_webserver(self) -> Proc:
        return self.start(
            "webserver", "dagster-webserver", "-w", str(WORKSPACE), "-h", "127.0.0.1", "-p", str(self.port)
        )

    def start_dev(self) -> Proc:
        """What ``make ui`` runs: ``dagster dev`` (webserver + daemon + one code server)."""
        return self.start(
            "dev", "dagster", "dev", "-w", str(WORKSPACE), "-h", "127.0.0.1", "-p", str(self.port)
        )

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        if self._instance is not None:
            self._instance.dispose()
            self._instance = None

    def log_tails(self, lines: int = 60) -> str:
        return "\n".join(
            f"----- {proc.name} log (last {lines} lines) -----\n{proc.tail(lines)}" for proc in self.procs
        )

    @property
    def instance(self) -> DagsterInstance:
        if self._instance is None:
            self._instance = DagsterInstance.from_config(str(self.home))
        return self._instance

    # --- waiting -------------------------------------------------------------------------------------------

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float, interval: float = 3.0) -> T:
        """``probe()``'s first truthy value; fails with the processes' log tails after ``timeout`` seconds or
        as soon as one of them exits."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            dead = [p for p in self.procs if p.popen.poll() is not None]
            if dead:
                names = ", ".join(f"{p.name} (exit {p.popen.returncode})" for p in dead)
                raise AssertionError(f"{names} exited while waiting for {what}\n{self.log_tails()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{self.log_tails()}")
            time.sleep(interval)

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                payload = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # GraphQL errors come back as HTTP 400/500 with a JSON body
            raise AssertionError(
                f"GraphQL {exc.code}: {exc.read().decode(errors='replace')[:3000]}"
            ) from None
        assert "errors" not in payload, payload["errors"]
        return payload["data"]

    def wait_for_webserver(self, timeout: float = 600) -> None:
        def location_loaded() -> bool:
            try:
                data = self.graphql(
                    "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus "
                    "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
                )
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False
            entries = data["workspaceOrError"]["locationEntries"]
            for entry in entries:
                error = entry["locationOrLoadError"]
                if error and error["__typename"] == "PythonError":
                    raise AssertionError(f"code location {entry['name']} failed to load: {error['message']}")
            return bool(entries) and all(
                e["loadStatus"] == "LOADED" and e["locationOrLoadError"] for e in entries
            )

        self.wait_for("the webserver to load the code location", location_loaded, timeout)

    def wait_for_daemons(self, timeout: float = 600) -> None:
        wanted = {"SENSOR", "QUEUED_RUN_COORDINATOR", "BACKFILL"}

        def healthy() -> bool:
            data = self.graphql("{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }")
            statuses = data["instance"]["daemonHealth"]["allDaemonStatuses"]
            return wanted <= {s["daemonType"] for s in statuses if s["healthy"]}

        self.wait_for(f"daemons {sorted(wanted)} to report healthy", healthy, timeout, interval=5)

    # --- runs ------------------------------------------------------------------------------------------------

    def runs(self, **filters: Any) -> list[DagsterRun]:
        return list(self.instance.get_runs(RunsFilter(**filters)))

    def failure_message(self, run_id: str) -> str:
        """Why a run failed: its failure, step failure and engine-error events, root causes included."""
        lines = []
        for record in self.instance.get_records_for_run(run_id).records:
            entry = record.event_log_entry
            event = entry.dagster_event
            if event is None or event.event_type not in FAILURE_EVENTS:
                continue
            error = getattr(event.event_specific_data, "error", None)
            if event.event_type == DagsterEventType.ENGINE_EVENT and error is None and entry.level < 40:
                continue
            lines.append(
                f"[{event.event_type_value}] {event.step_key or ''} {entry.user_message or event.message}"
            )
            while error is not None:
                lines.append(f"    {error.cls_name}: {error.message.strip()[:2000]}")
                error = error.cause
        return "\n".join(lines) or "(no failure events recorded)"

    def wait_for_run(self, run_id: str, timeout: float) -> DagsterRun:
        """Waits until the run finishes; a run that fails or is canceled fails the test with its reasons."""

        def finished() -> DagsterRun | None:
            run = self.instance.get_run_by_id(run_id)
            return run if run is not None and run.status in FINISHED else None

        try:
            run = self.wait_for(f"run {run_id} to finish", finished, timeout, interval=5)
        except AssertionError as exc:
            current = self.instance.get_run_by_id(run_id)
            status = current.status.value if current else "missing"
            raise AssertionError(
                f"{exc}\nrun {run_id} is {status}:\n{self.failure_message(run_id)}"
            ) from None
        if run.status != DagsterRunStatus.SUCCESS:
            raise AssertionError(
                f"run {run_id} ({run.job_name}) ended {run.status.value}:\n{self.failure_message(run_id)}\n"
                f"{self.log_tails()}"
            )
        return run

    def engine_messages(self, run_id: str) -> list[str]:
        records = self.instance.get_records_for_run(run_id, of_type=DagsterEventType.ENGINE_EVENT).records
        return [r.event_log_entry.user_message or "" for r in records]
