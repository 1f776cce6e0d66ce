"""A standalone Spark master + N workers on loopback (scripts/spark_cluster.sh), started and always stopped:
the cluster fixture of the tests and the cluster of bench/spark_cluster.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "spark_cluster.sh"
# what one executor may ask for on this shared 2-core box: one core, a small heap (spark.executor.memory)
EXECUTOR_CONF = {"spark.executor.memory": "640m", "spark.executor.cores": "1"}


class ClusterStartError(RuntimeError):
    """The master or a worker did not come up (the script's stderr says why; logs in its state folder)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def loopback_cluster(
    workers: int = 2, cores: int = 1, memory: str = "1g", state: Path | None = None
) -> Iterator[str]:
    """Start a master and ``workers`` workers (``cores`` cores, ``memory`` for executors each) on free
    loopback ports; yield the master URL; stop this process's Spark session and every daemon on exit."""
    port = free_port()
    env = dict(os.environ)
    env.update(
        FM_SPARK_MASTER_PORT=str(port),
        FM_SPARK_MASTER_UI_PORT=str(free_port()),
        FM_SPARK_WORKER_UI_PORT="0",  # each worker's UI on a free port
        FM_SPARK_WORKERS=str(workers),
        FM_SPARK_WORKER_CORES=str(cores),
        FM_SPARK_WORKER_MEMORY=memory,
        # the executors run this interpreter (CI's venv is not the repository's .venv)
        FM_SPARK_PYTHON=sys.executable,
    )
    if state is not None:
        env["FM_SPARK_STATE"] = str(state)
    try:
        started = subprocess.run(
            ["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300
        )
        if started.returncode != 0:
            raise ClusterStartError(f"the loopback Spark cluster did not start: {started.stderr.strip()}")
        yield started.stdout.strip().splitlines()[-1]
    finally:
        from fm_assets.defs.resources.spark import stop_session  # its executors go before their workers

        stop_session()
        subprocess.run(["bash", str(SCRIPT), "stop"], env=env, timeout=120, capture_output=True)
