"""kill -9 at random points of a run, and two runs of one batch at once: the outcome is always the clean run's
bytes, and a second run of a busy batch either waits or stops with a message naming the holder (runs of
different batches overlap: tests/concurrency).

``FM_RELIABILITY_KILLS`` sets how many kill points run (CI: 3; ``bench/`` or a soak: 100).
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Root, env_for
from sample_licence import package_licence

from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore

pytestmark = [pytest.mark.slow]

KILLS = int(os.environ.get("FM_RELIABILITY_KILLS", "3"))
BATCH = "b-kill"


def _fresh(tmp: Path, tokenizer_file: Path, src: Path) -> Root:
    path = tmp / "root"
    (path / "dagster_home").mkdir(parents=True)
    (path / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    land_batch(
        ObjectStore(str(path)),
        src,
        source="killed",
        license_id=package_licence(src),
        namespace="cloud",
        batch_id=BATCH,
    )
    return Root(path, env_for(path, tokenizer_file), BATCH)


def _fingerprint(root: Root) -> dict[str, str]:
    """Every stage's data version, every shard's sha256 and the release manifest's sha256."""
    found = {f"stage:{k}": v for k, v in root.versions().items()}
    for tar in sorted((root.path / "stages" / "shard").rglob("*.tar")):
        found[f"shard:{tar.name}"] = hashlib.sha256(tar.read_bytes()).hexdigest()
    for manifest in sorted((root.path / "datasets").rglob("manifest.json")):
        found[f"release:{manifest.parent.name}"] = hashlib.sha256(manifest.read_bytes()).hexdigest()
    return found


def _start(root: Root, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fm_assets.cli.main", "run", *args],
        env=root.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def reference(real_sample, tokenizer_file, tmp_path_factory) -> tuple[dict[str, str], float, Path]:
    src = Path(real_sample["dest"]) / sorted(real_sample["packages"])[0]
    root = _fresh(tmp_path_factory.mktemp("reference"), tokenizer_file, src)
    started = time.perf_counter()
    run = root.fm("run")
    assert run.returncode == 0, run.stderr[-3000:]
    return _fingerprint(root), time.perf_counter() - started, src


@pytest.mark.parametrize("point", range(KILLS))
def test_kill_minus_nine_anywhere_then_rerun_is_byte_identical(point, reference, tokenizer_file, tmp_path):
    clean, clean_seconds, src = reference
    root = _fresh(tmp_path, tokenizer_file, src)
    delay = random.Random(point).uniform(0.5, clean_seconds * 0.95)  # start-up through the release
    proc = _start(root)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and any worker it started
    proc.wait()
    rerun = root.fm("run")
    assert rerun.returncode == 0, f"kill at {delay:.1f}s: {rerun.stderr[-3000:]}"
    assert _fingerprint(root) == clean, f"kill at {delay:.1f}s changed the outcome"
    assert not list((root.path / ".tmp").glob("fm-stage-*")), "a killed run's scratch was not cleaned"


def test_second_run_of_a_busy_batch_stops_or_waits(reference, tokenizer_file, tmp_path):
    clean, _, src = reference
    root = _fresh(tmp_path, tokenizer_file, src)
    first = _start(root)
    lock = root.path / "locks" / f"run-{BATCH}.lock"
    deadline = time.time() + 60
    while (not lock.exists() or not lock.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    second = root.fm("run")
    assert second.returncode == 3, second.stderr
    assert f"pid {first.pid}" in second.stderr and "--wait" in second.stderr, second.stderr
    waiting = _start(root, "--wait")
    assert first.wait(timeout=600) == 0
    _, err = waiting.communicate(timeout=600)
    assert waiting.returncode == 0, err[-3000:]
    assert _fingerprint(root) == clean
