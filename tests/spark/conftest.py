"""Spark fixtures: one local session for the whole run, and a loopback standalone cluster on demand."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "spark_cluster.sh"


@pytest.fixture
def spark():
    """The shared local session (recreated only if a cluster test switched the master)."""
    from fm_assets.defs.resources.spark import get_or_create_session

    return get_or_create_session(master="local[2]", shuffle_partitions=4)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def spark_cluster_master() -> Iterator[str]:
    """Start a standalone master + 1 worker (1 core, 1g) on loopback via scripts/spark_cluster.sh."""
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
