"""Every `fm` command writes its result on stdout (what `x=$(fm ...)` captures) and its notes, progress and
warnings on stderr. The pipeline commands (`fm run`, `fm demo`) are covered in test_pipe.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "root"


def fm(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fm_assets.cli.main", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DAGSTER_HOME": str(root.parent / "dagster_home")},
    )


def land(root: Path, tmp_path: Path, namespace: str) -> str:
    src = tmp_path / f"{namespace}.jsonl"
    src.write_text(json.dumps({"text": f"a document landed in {namespace}"}) + "\n")
    landed = fm(root, "land", str(src), "--source", namespace, "--license", "MIT", "--namespace", namespace)
    assert landed.returncode == 0, landed.stderr
    return landed.stdout.strip()


def test_results_on_stdout_notes_on_stderr(root, tmp_path):
    land(root, tmp_path, "cloud")
    held = land(root, tmp_path, "quarantine")

    promoted = fm(root, "quarantine", "promote", held, "--to", "cloud", "--reviewer", "ana", "--reason", "ok")
    assert promoted.returncode == 0, promoted.stderr
    assert promoted.stdout.startswith(f"promoted {held} to cloud") and "promoted" not in promoted.stderr

    verified = fm(root, "verify")
    assert verified.returncode == 0, verified.stderr
    assert "checked " in verified.stdout and "no damage found" in verified.stdout
    assert verified.stderr == ""

    repaired = fm(root, "repair", "--cas")
    assert repaired.returncode == 0 and repaired.stdout.startswith("restored 0 CAS object(s)"), (
        repaired.stderr
    )

    report = tmp_path / "audit.md"
    audit = fm(root, "audit", "--format", "md", "-o", str(report))
    assert audit.returncode == 0 and audit.stdout.strip() == f"audit written to {report}", audit.stderr
    assert report.read_text().startswith("#")

    # errors stay on stderr with a non-zero exit, and nothing on stdout a script could take for a result
    again = fm(root, "quarantine", "promote", "20990101T000000000000Z-none-00000000", "--to", "cloud",
               "--reviewer", "ana", "--reason", "ok")  # fmt: skip
    assert again.returncode == 2 and again.stdout == "" and "fm quarantine promote" in again.stderr
