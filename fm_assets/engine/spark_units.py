"""Work units as Spark tasks (``FM_UNIT_EXECUTOR=spark``): one task per unit, on whatever master the
session runs (``local[*]``, a standalone cluster, ...).

The driver broadcasts the pickled unit job once (``pool.dump_job``: the stage, its context without
resources, what ``prepare`` returned, the parent's environment); ``sc.parallelize(tasks, n).map(...)`` runs
``pool.execute_unit`` in the executors' Python workers, which read the unit's inputs from the store, write
its files and commit its marker exactly as a local worker does, so the store must be reachable from the
executors (a local root on the same machine, as for a loopback cluster, or S3). Markers come back to the
driver; a unit's exception comes back as a ``UnitFailure`` (no Spark task retry for a deterministic error)
and is raised like the local pool's. A task's native thread pools get its ``spark.task.cpus`` cores
(``thread_budget``). Progress advances per finished task through an accumulator.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from fm_assets.engine.pool import (
    Advance,
    OnDone,
    Outcome,
    UnitFailure,
    UnitTask,
    execute_loaded,
    raise_failure,
)
from fm_assets.engine.thread_budget import apply_thread_budget

log = logging.getLogger(__name__)

PROGRESS_POLL_SECONDS = 0.2


class SparkUnitsError(RuntimeError):
    """The Spark job running the units failed as a whole (an executor lost, a Python worker crashed)."""


def _spark_task(key: str, broadcast: Any, done: Any, task: UnitTask) -> Outcome:
    # executors keep their own environment (their credentials, paths): only the job crosses. A task owns
    # spark.task.cpus cores of its executor, whose other slots run other tasks' Python workers.
    from pyspark import TaskContext

    context = TaskContext.get()
    apply_thread_budget(context.cpus() if context is not None else 1)
    outcome = execute_loaded(key, lambda: broadcast.value, task, apply_env=False)
    done.add(1)
    return outcome


def run_on_spark(
    session: Any,
    label: str,
    payload: bytes,
    tasks: Sequence[UnitTask],
    on_done: OnDone,
    advance: Advance,
    passthrough: tuple[type[BaseException], ...] = (),
) -> None:
    """Run ``tasks`` as Spark tasks of ``session`` (a classic SparkSession: Spark Connect has no RDDs)."""
    sc = getattr(session, "sparkContext", None)
    if sc is None:
        raise SparkUnitsError(
            f"{label}: FM_UNIT_EXECUTOR=spark needs a classic SparkSession (RDD API), not {session!r}"
        )
    key = uuid.uuid4().hex
    broadcast = sc.broadcast(payload)
    done = sc.accumulator(0)
    results: list[Outcome] = []
    errors: list[BaseException] = []

    group = f"fm-units-{key}"

    def collect() -> None:
        try:
            sc.setJobGroup(group, f"{label}: {len(tasks)} units")
            rdd = sc.parallelize(list(tasks), len(tasks))
            results.extend(rdd.map(lambda task: _spark_task(key, broadcast, done, task)).collect())
        except BaseException as exc:  # re-raised in the calling thread
            errors.append(exc)

    runner = threading.Thread(target=collect, name=f"fm-spark-units-{label}", daemon=True)
    runner.start()
    shown = 0
    try:
        while runner.is_alive():
            runner.join(PROGRESS_POLL_SECONDS)
            finished = done.value  # accumulator updates reach the driver as tasks finish
            if finished > shown:
                advance(finished - shown)
                shown = finished
        if errors:
            raise SparkUnitsError(
                f"{label}: the Spark job running {len(tasks)} units failed: {errors[0]}"
            ) from errors[0]
        if shown < len(tasks):
            advance(len(tasks) - shown)
        failure = next((o for o in results if isinstance(o, UnitFailure)), None)
        if failure is not None:
            raise_failure(label, failure, passthrough)
        for task, outcome in zip(tasks, results, strict=True):
            assert not isinstance(outcome, UnitFailure)
            on_done(task, outcome)
    except BaseException:
        if runner.is_alive():  # interrupted while the job runs: stop its tasks (committed units stay)
            sc.cancelJobGroup(group)
        raise
    finally:
        broadcast.unpersist()
