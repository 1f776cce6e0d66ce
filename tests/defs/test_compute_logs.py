"""ThreadedComputeLogManager: a run's stdout and stderr reach both Dagster's log files and the terminal,
including what a child process writes and what is written just before the capture ends, with no process
started for the copy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# a process whose stdout and stderr are the "terminal" (pipes read by the test), as `fm run`'s are
CAPTURING_PROCESS = """
import json, os, subprocess, sys, threading
from fm_assets.defs.compute_logs import ThreadedComputeLogManager

manager = ThreadedComputeLogManager(base_dir=sys.argv[1])
key = ["run-1", "compute_logs", "step"]
before = threading.active_count()
with manager.capture_logs(key):
    print("from python", flush=True)
    os.write(2, b"raw stderr\\n")
    subprocess.run(["sh", "-c", "echo from a child"], check=True)
    during = threading.active_count()
    print("last line, right before the end", flush=True)
after = threading.active_count()
print("after the capture", flush=True)
paths = {io: manager.get_captured_local_path(key, io) for io in ("out", "err")}
os.write(2, json.dumps({"threads": [before, during, after], "paths": paths,
                        "complete": manager.is_capture_complete(key)}).encode())
"""


def test_output_reaches_the_log_files_and_the_terminal(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CAPTURING_PROCESS, str(tmp_path / "storage")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    terminal_err, _, report_text = done.stderr.rpartition("raw stderr\n")
    report = json.loads(report_text)
    before, during, after = report["threads"]
    assert during == before + 2 and after == before  # one follower thread per stream, gone after; no process
    out = Path(report["paths"]["out"]).read_text()
    err = Path(report["paths"]["err"]).read_text()
    lines = ["from python", "from a child", "last line, right before the end"]
    assert out.splitlines() == lines and err == "raw stderr\n"
    assert report["complete"]
    assert done.stdout.splitlines() == [
        *lines,
        "after the capture",
    ]  # the last line too; then no longer copied
    assert terminal_err == ""  # stderr reached the terminal once: what preceded the report is that one line


def test_the_local_instance_uses_it(tmp_path: Path) -> None:
    from dagster import DagsterInstance

    from fm_assets.defs.compute_logs import ThreadedComputeLogManager
    from fm_assets.defs.instance import install_instance_config

    home = install_instance_config(tmp_path / "home").parent
    with DagsterInstance.from_config(str(home)) as instance:
        manager = instance.compute_log_manager
        assert isinstance(manager, ThreadedComputeLogManager)
        assert Path(manager.get_captured_local_path(["r", "s"], "out")).is_relative_to(home / "storage")
