"""The Spark engine: one SparkSession per process, ``local[*]`` by default, a cluster by configuration.

The master comes from settings (``FM_SPARK_MASTER``, e.g. ``spark://127.0.0.1:7077``). Starting a JVM
costs seconds, so every step in a process shares the session; asking for a different master stops the
old session first. Executors run the same Python as the driver (``sys.executable``) and get the project
root on ``PYTHONPATH`` so they can import the step modules without an install.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

if TYPE_CHECKING:  # pyspark is imported when a session starts, not with the code location
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
_LOCK = threading.Lock()
_ACTIVE: dict[str, object] = {}  # master + conf fingerprint of the live session

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
    "spark.sql.adaptive.enabled": "true",
    "spark.python.worker.reuse": "true",
    "spark.driver.extraJavaOptions": "-Dio.netty.tryReflectionSetAccessible=true",
}


def detect_java_home() -> str | None:
    """JAVA_HOME if set, else the JDK that owns the ``java`` on PATH."""
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    if java is None:
        return None
    return str(Path(java).resolve().parent.parent)


def _is_loopback(master: str) -> bool:
    return master.startswith("local") or "127.0.0.1" in master or "localhost" in master


def _python_path_with_project() -> str:
    others = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _PROJECT_ROOT]
    return os.pathsep.join([_PROJECT_ROOT, *others])


def get_or_create_session(
    master: str = "local[*]",
    app_name: str = "fm-data-platform",
    driver_memory: str = "2g",
    shuffle_partitions: int = 8,
    extra_conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
) -> SparkSession:
    """The process-wide SparkSession (created on first use; a different master or conf restarts it)."""
    from pyspark.sql import SparkSession

    conf = dict(DEFAULT_CONF)
    conf.update(
        {
            "spark.master": master,
            "spark.app.name": app_name,
            "spark.driver.memory": driver_memory,
            "spark.sql.shuffle.partitions": str(shuffle_partitions),
            "spark.default.parallelism": str(shuffle_partitions),
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": _python_path_with_project(),
        }
    )
    if _is_loopback(master):
        conf.setdefault("spark.driver.host", "127.0.0.1")
        conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
    conf.update(extra_conf or {})
    key = repr(sorted(conf.items()))
    with _LOCK:
        current = _live_session()
        if current is not None and _ACTIVE.get("key") == key:
            return current
        if current is not None:
            logger.info("stopping Spark session for %s to start one with new settings", _ACTIVE.get("master"))
            current.stop()
        java_home = detect_java_home()
        if java_home:
            os.environ.setdefault("JAVA_HOME", java_home)
        if _is_loopback(master):  # keep every Spark socket on loopback, never the machine's other interfaces
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # pyspark starts the JVM (and the JVM its Python workers) with this process's environment and
        # offers no other channel for it: this is the one place the platform sets environment variables.
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ["PYTHONPATH"] = _python_path_with_project()
        builder = SparkSession.builder
        for name, value in conf.items():
            builder = builder.config(name, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel(log_level)
        _ACTIVE.update(key=key, master=master, session=session)
        logger.info("Spark session ready: master=%s version=%s", master, session.version)
        return session


def _live_session() -> SparkSession | None:
    if "pyspark.sql" not in sys.modules:  # no session can exist: do not import pyspark to find out
        return None
    from pyspark.sql import SparkSession

    session = _ACTIVE.get("session") or SparkSession.getActiveSession()
    if isinstance(session, SparkSession) and session.sparkContext._jsc is not None:
        return session
    return None


def stop_session() -> None:
    with _LOCK:
        current = _live_session()
        if current is not None:
            current.stop()
        _ACTIVE.clear()


class SparkResource(dg.ConfigurableResource):
    """Dagster handle on the shared SparkSession (``local[*]``, or a cluster such as spark://host:7077)."""

    master: str = "local[*]"
    app_name: str = "fm-data-platform"
    driver_memory: str = "2g"
    shuffle_partitions: int = 8
    extra_conf: dict[str, str] = Field(default_factory=dict)
    log_level: str = "ERROR"

    def session(self) -> SparkSession:
        return get_or_create_session(
            master=self.master,
            app_name=self.app_name,
            driver_memory=self.driver_memory,
            shuffle_partitions=self.shuffle_partitions,
            extra_conf=dict(self.extra_conf),
            log_level=self.log_level,
        )
