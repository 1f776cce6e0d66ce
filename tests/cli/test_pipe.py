"""`fm` in a pipe, as CI and `| tee` run it: no bar redrawn line by line, tables not squeezed to 80 columns,
and a reader that closes early (`| head`) ends the command quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sample_licence import package_licence

pytestmark = [pytest.mark.slow]
FM = f"{sys.executable} -m fm_assets.cli.main"


def test_run_report_and_rejects_through_pipes(fm_env, real_sample, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    package = Path(real_sample["dest"]) / sorted(real_sample["packages"])[0]
    docs = next(package.glob("*.jsonl")).read_text().splitlines()[:20]
    broken = ['{"text": "unterminated' for _ in range(500)]  # 500 land rejects for `fm rejects`
    (src / "mixed.jsonl").write_text("\n".join(docs + broken) + "\n")
    env = {**os.environ, "FM_NEAR_DEDUP": "0"}
    env.pop("FM_PROGRESS", None)  # the default: decided by whether stderr is a terminal

    def sh(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-o", "pipefail", "-c", command], env=env, capture_output=True, text=True
        )

    landed = sh(f"{FM} land {src} --source piped --license '{package_licence(package)}' | cat")
    assert landed.returncode == 0, landed.stderr
    batch = landed.stdout.strip()

    run = sh(f"{FM} run 2>{tmp_path / 'run.err'} | cat")
    progress = (tmp_path / "run.err").read_text()
    assert run.returncode == 0, progress[-3000:]
    assert "\r" not in run.stdout + progress  # no progress bar redrawn into the log
    assert "[fm run " in progress and "stages" in progress  # periodic plain progress instead, on stderr
    table = [line for line in run.stdout.splitlines() if "│" in line]  # the result, on stdout
    assert table and max(map(len, table)) > 100  # the summary table is not squeezed to 80 columns
    assert "│" not in progress and "[fm run " not in run.stdout
    assert "great_expectations" not in progress and "lance::" not in progress  # no library chatter
    released = [line for line in run.stdout.splitlines() if line.startswith("released ")]
    assert released and all(" version " in line and line.endswith("manifest.json") for line in released)

    report = sh(f"{FM} report --json | cat")
    assert json.loads(report.stdout)[0]["batch"] == batch
    table = sh(f"{FM} report | cat")  # the table is the command's output: stdout, at full width
    assert batch in table.stdout and max(map(len, table.stdout.splitlines())) > 100, table.stdout
    audit = sh(f"{FM} audit | cat")
    assert "per batch evidence" in audit.stdout and batch in audit.stdout, audit.stderr
    early = sh(f"{FM} report --json | true")  # the reader is gone before fm writes anything
    assert early.returncode == 141, early.stderr
    assert "Traceback" not in early.stderr and "Exception ignored" not in early.stderr, early.stderr

    head = sh(f"{FM} rejects {batch} | head -n 1")
    assert json.loads(head.stdout)["reason"]
    assert "Traceback" not in head.stderr and "BrokenPipeError" not in head.stderr, head.stderr
    assert head.returncode == 141  # like any Unix tool whose reader left (pipefail reports it)
