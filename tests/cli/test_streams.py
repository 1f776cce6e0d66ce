"""Every `fm` command writes its result on stdout (what `x=$(fm ...)` captures) and its notes, progress and
warnings on stderr (`fm run` is covered in test_pipe.py); `fm rejects` tells a typo from a clean batch by its
exit status and names each reject's landed file."""

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


def run_land_stage(root: Path, batch: str) -> None:
    """The `land` stage of ``batch`` (enough for its rejects; the whole chain is test_pipe's)."""
    from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
    from fm_assets.engine.refs import write_ref
    from fm_assets.engine.run import run_stage
    from fm_assets.engine.stage import StageContext
    from fm_assets.engine.store import ObjectStore
    from fm_assets.stages import land as land_stage

    store = ObjectStore(str(root))
    outcome = run_stage(
        land_stage.STAGE, StageContext(store, batch, PipelineConfigResource(progress=False), {})
    )
    write_ref(store, "land", batch, outcome.success, cache_hit=False, wall_seconds=0.0)


def test_rejects_tells_a_typo_from_a_clean_batch_and_names_the_landed_file(root, tmp_path):
    clean = land(root, tmp_path, "cloud")
    src = tmp_path / "mixed"
    src.mkdir()
    (src / "good.jsonl").write_text(json.dumps({"text": "fine"}) + "\n")
    (src / "bad.jsonl").write_text('{"text": "unterminated\n')
    landed = fm(root, "land", str(src), "--source", "mixed", "--license", "MIT")
    dirty = landed.stdout.strip()

    not_run = fm(root, "rejects", dirty)
    assert not_run.returncode == 1 and not_run.stdout == "" and f"fm run {dirty}" in not_run.stderr

    run_land_stage(root, clean)
    run_land_stage(root, dirty)
    (row,) = [json.loads(line) for line in fm(root, "rejects", dirty).stdout.splitlines()]
    assert row["stage"] == "land" and row["landed_file"] == str(
        root / "landing" / dirty / "files" / "bad.jsonl"
    )

    none = fm(root, "rejects", clean)
    assert (none.returncode, none.stdout) == (0, "") and none.stderr.startswith(
        f"0 rejected record(s) in {clean}"
    )

    typo = fm(root, "rejects", clean[:-1])
    assert typo.returncode == 2 and typo.stdout == ""
    assert (
        len(typo.stderr.strip().splitlines()) == 1
        and f"no complete landing batch {clean[:-1]!r}" in typo.stderr
    )
    stage = fm(root, "rejects", clean, "--stage", "lnad")
    assert stage.returncode == 2 and "no stage 'lnad'" in stage.stderr


def test_sample_data_in_a_pipe_draws_no_bars(root, tmp_path):
    fetched = fm(root, "sample-data", str(tmp_path / "sample"), "--source", "python", "--max-docs", "3")
    assert fetched.returncode == 0, fetched.stderr
    assert "\r" not in fetched.stderr and "it/s" not in fetched.stderr  # no tqdm bar redrawn into the log
    assert "python-stdlib" in fetched.stdout and "PSF-2.0" in fetched.stdout  # the summary is the result


def test_a_narrow_terminal_shows_whole_batch_ids(root, tmp_path):
    import io

    from rich.console import Console

    from fm_assets.cli.tables import print_summary
    from fm_assets.engine.store import ObjectStore

    batch = land(root, tmp_path, "cloud")
    run_land_stage(root, batch)
    screen = io.StringIO()
    print_summary(
        Console(file=screen, width=80, force_terminal=True, color_system=None), ObjectStore(str(root)), None
    )
    assert any(batch in line for line in screen.getvalue().splitlines()), (
        screen.getvalue()
    )  # whole, on one line


def test_report_of_a_batch_that_is_not_landed_is_a_one_line_error(root, tmp_path):
    typo = fm(root, "report", "20260101T000000Z-nothing-here", "--json")
    assert typo.returncode == 2, typo.stderr
    assert typo.stdout == "" and len(typo.stderr.strip().splitlines()) == 1
    assert "no complete landing batch '20260101T000000Z-nothing-here'" in typo.stderr
    assert "Traceback" not in typo.stderr
