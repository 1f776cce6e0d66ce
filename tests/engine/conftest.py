"""Fixtures of the unit-pool tests: the sample landed and run up to pii_preflag once (one worker), the
clean filter output every variant is compared with, and a loopback standalone Spark cluster on demand."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fm_assets.engine.store import ObjectStore

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "spark_cluster.sh"


@pytest.fixture(scope="session")
def pool_upstream(real_sample: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding the sample landed and processed up to pii_preflag, in-process (filter not run)."""
    from pool_helpers import land_sample, run_chain, settings  # the pipeline's imports: only where needed

    root = tmp_path_factory.mktemp("pool-upstream") / "root"
    run_chain(land_sample(root, real_sample), settings(workers=1), until="pii_preflag")
    return root


@pytest.fixture
def upstream_copy(pool_upstream: Path, tmp_path: Path) -> Callable[[str], ObjectStore]:
    """A fresh copy of ``pool_upstream`` per call (each test mutates its own)."""

    def copy(name: str) -> ObjectStore:
        dest = tmp_path / name
        shutil.copytree(pool_upstream, dest)
        return ObjectStore(str(dest))

    return copy


@pytest.fixture(scope="session")
def clean_filter(pool_upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fingerprint of the real filter run in-process on ``pool_upstream``: what every variant must equal."""
    from pool_helpers import fingerprint, run_one, settings

    from fm_assets.stages.filter import STAGE

    dest = tmp_path_factory.mktemp("pool-clean") / "root"
    shutil.copytree(pool_upstream, dest)
    store = ObjectStore(str(dest))
    outcome = run_one(store, STAGE, settings(workers=1))
    assert len(outcome.success.units) >= 6, "the sample should give the filter several units"
    return fingerprint(store, "filter")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def spark_cluster_master() -> Iterator[str]:
    """A standalone master + 1 worker (1 core, 1g) on loopback via scripts/spark_cluster.sh (as tests/spark)."""
    env = dict(os.environ)
    env.update(
        FM_SPARK_MASTER_PORT=str(_free_port()),
        FM_SPARK_MASTER_UI_PORT=str(_free_port()),
        FM_SPARK_WORKER_UI_PORT=str(_free_port()),
        FM_SPARK_WORKER_CORES="1",
        FM_SPARK_WORKER_MEMORY="1g",
        # the executors run this interpreter (CI's venv is not the repository's .venv)
        FM_SPARK_PYTHON=sys.executable,
    )
    started = subprocess.run(
        ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300
    )
    if started.returncode != 0:
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=120)
        pytest.fail(f"cluster did not start: {started.stderr}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        from fm_assets.defs.resources.spark import stop_session

        stop_session()
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=120)
