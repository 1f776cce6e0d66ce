"""Issue 18 item 5: kill -9 anywhere in `fm revoke` leaves a state the next `fm run` or the same `fm revoke`
completes: one record (same id), its report, and every release that held the documents marked revoked in
its manifest, card.json and card.md (fm_loader refuses it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sample_licence import package_licence

import fm_loader

pytestmark = [pytest.mark.slow]
FM = [sys.executable, "-m", "fm_assets.cli.main"]


def fm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FM, *args], env=dict(os.environ), capture_output=True, text=True, timeout=900)


def kill_when(args: list[str], ready) -> None:
    """Start `fm ARGS` and kill -9 it as soon as ``ready()`` holds (or when it ends by itself)."""
    proc = subprocess.Popen(
        [*FM, *args], env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while proc.poll() is None and not ready():
        time.sleep(0.05)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()


def latest(root: Path) -> str:
    return json.loads((root / "datasets/fm-demo/LATEST.json").read_text())["version"]


def revocations(root: Path) -> list[Path]:
    return sorted((root / "compliance/revocations").glob("*.json"))


def assert_complete(root: Path, revocation: Path, held: str) -> None:
    report = json.loads((revocation.with_suffix("") / "report.json").read_text())
    assert report["verified"] and report["affected"]["documents"] > 0
    assert held in [m["version"] for m in report["marked_revoked"]]
    folder = root / "datasets/fm-demo" / held
    mark = json.loads((folder / "manifest.json").read_text())["revoked"]
    assert mark["revocation_id"] == revocation.stem
    assert json.loads((folder / "card.json").read_text())["revoked"] == mark
    assert (folder / "card.md").read_text().count("**REVOKED**") == 1
    with pytest.raises(fm_loader.RevokedDatasetError):
        fm_loader.Loader(str(folder / "manifest.json"), global_batch_size=2, allowed_namespaces=["cloud"])


def test_kill_9_in_fm_revoke_is_completed_by_the_next_run_or_revoke(
    real_sample, tokenizer_file, tmp_path, monkeypatch
):
    root = tmp_path / "root"
    for key, value in {"FM_ROOT": str(root), "DAGSTER_HOME": str(tmp_path / "dh"), "FM_PROGRESS": "0",
                       "FM_TOKENIZER_FILE": str(tokenizer_file), "FM_SEQ_LEN": "512", "FM_SPARK_MASTER": "local[1]",
                       "FM_MIN_PACKING_EFFICIENCY": "0.5"}.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    (tmp_path / "dh").mkdir()
    packages = [Path(real_sample["dest"]) / name for name in sorted(real_sample["packages"])]
    for source, package in (("docs-a", packages[0]), ("docs-b", packages[-1])):
        # each package under the licence its documents carry (land quarantines a conflicting record licence)
        assert (
            fm("land", str(package), "--source", source, "--license", package_licence(package)).returncode
            == 0
        )
    assert fm("run").returncode == 0
    first = latest(root)

    # killed right after the record: `fm run` re-runs, releases and finishes the revocation
    kill_when(["revoke", "--source", "docs-a", "--reason", "LEGAL-1"], lambda: bool(revocations(root)))
    (pair,) = revocations(root)
    assert not (pair.with_suffix("") / "report.json").exists()
    ran = fm("run")
    assert ran.returncode == 0, ran.stderr
    assert "completing revocation" in ran.stderr
    assert_complete(root, pair, first)

    # killed once the new release is out (before the old one is marked): the same `fm revoke` resumes it
    second = latest(root)
    args = ["revoke", "--source", "docs-b", "--reason", "LEGAL-2"]
    kill_when(args, lambda: latest(root) != second)
    again = fm(*args)
    assert again.returncode == 0, again.stderr
    assert "resuming revocation" in again.stderr and "verified" in again.stdout
    records = revocations(root)
    assert len(records) == 2
    assert_complete(root, next(r for r in records if r != pair), second)
