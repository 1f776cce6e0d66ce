"""The collector tuning reaches every kind of process that runs the pipeline: the `fm` CLI, a process that
loads the code location, and a unit worker."""

from __future__ import annotations

import gc
import subprocess
import sys

from fm_assets.engine.collector import BATCH_WORK_THRESHOLDS
from fm_assets.engine.pool import map_on_workers, spread_over


def thresholds_after_importing(module: str) -> tuple[int, ...]:
    code = f"import gc, {module}; print(*gc.get_threshold())"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return tuple(int(value) for value in out.split())


def worker_thresholds(_: int) -> tuple[int, ...]:
    return gc.get_threshold()


def test_the_cli_and_the_code_location_collect_less_often_than_pythons_default() -> None:
    assert (
        thresholds_after_importing("json") != BATCH_WORK_THRESHOLDS
    )  # a plain interpreter keeps the default
    assert thresholds_after_importing("fm_assets.cli") == BATCH_WORK_THRESHOLDS
    assert thresholds_after_importing("fm_assets.defs") == BATCH_WORK_THRESHOLDS


def test_a_unit_worker_collects_less_often_than_pythons_default() -> None:
    with spread_over(2):
        assert set(map_on_workers(worker_thresholds, [0, 1])) == {BATCH_WORK_THRESHOLDS}
