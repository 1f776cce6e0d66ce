"""kill -9 in the middle of a stage: the re-run resumes committed units and ends byte-identical to a clean run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sample_licence import package_licence

from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.registry import CHAIN_NAMES

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _fm(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "fm_assets.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _committed_units(root: Path, stage: str) -> int:
    return sum(1 for _ in (root / "stages" / stage).glob("*/*/_units/*.json"))


def _stage_versions(store: ObjectStore, batch: str) -> dict[str, str]:
    return {stage: read_success(store, stage, batch).data_version for stage in CHAIN_NAMES["text"]}


def test_kill_minus_nine_then_resume_is_byte_identical(fm_env, real_sample, tmp_path):
    package = sorted(real_sample["packages"])[0]
    src = Path(real_sample["dest"]) / package
    # near-dup (Spark) is covered by its own tests; here it would only add JVM start-ups to every run
    env = {**os.environ, "FM_ROOT": str(fm_env), "FM_NEAR_DEDUP": "0"}

    store = ObjectStore(str(fm_env))
    batch = land_batch(
        store, src, source="crashy", license_id=package_licence(src), namespace="cloud", batch_id="b-crash"
    ).batch
    proc = _fm(env, "run", batch)
    deadline = time.time() + 240
    while _committed_units(fm_env, "filter") < 1 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed; use smaller units"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = _committed_units(fm_env, "filter")
    assert killed_at >= 1
    assert not list((fm_env / "stages" / "filter").glob("*/*/_SUCCESS.json"))
    # the unit job the killed driver handed its workers is inside the root's scratch area, not the system's
    killed_scratch = list((fm_env / ".tmp").glob(f"fm-stage-{proc.pid}-*/fm-unit-job-*.pkl"))
    assert killed_scratch

    resumed = _fm(env, "run", batch)
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err.decode()[-3000:]
    assert not any(path.exists() for path in killed_scratch)  # the next run cleared the dead run's scratch
    success = read_success(store, "filter", batch)
    assert success.units_skipped == killed_at  # committed units were not redone
    assert success.units_computed == len(success.units) - killed_at

    clean_root = tmp_path / "clean"
    clean_store = ObjectStore(str(clean_root))
    land_batch(
        clean_store,
        src,
        source="crashy",
        license_id=package_licence(src),
        namespace="cloud",
        batch_id="b-crash",
    )
    clean = _fm(
        {**env, "FM_ROOT": str(clean_root), "DAGSTER_HOME": str(tmp_path / "dagster_home")}, "run", batch
    )
    _, err = clean.communicate(timeout=600)
    assert clean.returncode == 0, err.decode()[-3000:]
    assert _stage_versions(store, batch) == _stage_versions(clean_store, batch)
    shard_prefix = read_success(store, "shard", batch).prefix
    clean_prefix = read_success(clean_store, "shard", batch).prefix
    shard_files = sorted(p.name for p in (fm_env / shard_prefix).glob("shard-*"))
    assert shard_files
    for name in shard_files:
        assert (fm_env / shard_prefix / name).read_bytes() == (clean_root / clean_prefix / name).read_bytes()
