"""The honest stall metric: throughput lost to input against the trainer's compute-only step, which a wait-time
stall under-reports when input work slows the step itself (arithmetic on a scripted clock, then on a loader)."""

from __future__ import annotations

import logging
import time

import pytest
from loader_helpers import make_dataset

from fm_loader import Loader, MetricsLogger, measure_compute_baseline
from fm_loader.metrics import LoaderMetrics, input_loss


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def scripted(steps: int, wait_s: float, step_s: float, baseline: float | None) -> dict[str, float]:
    """A trainer whose step takes ``step_s`` of which ``wait_s`` is waiting for the batch."""
    clock = Clock()
    m = LoaderMetrics(clock=clock, compute_baseline_s=baseline)
    for _ in range(steps):
        asked = m.ask()
        clock.now += wait_s
        m.handed(asked, built_at=clock.now, build_s=0.0)
        m.batches += 1
        clock.now += step_s - wait_s  # the step itself, slowed by decode workers taking the CPU
    m.ask()  # the request after the last step ends it
    return m.snapshot()


def test_the_loss_counts_what_the_wait_time_misses() -> None:
    # the case: compute-only 100 ms, the step takes 125 ms of which only 5 ms is waiting
    m = scripted(steps=40, wait_s=0.005, step_s=0.125, baseline=0.100)
    assert m["step_s_mean"] == pytest.approx(0.125)
    assert m["input_loss_fraction"] == pytest.approx(0.2)
    assert m["input_stall_fraction"] == pytest.approx(0.04, rel=0.03)
    assert m["compute_baseline_s"] == 0.100


def test_loss_arithmetic_and_bounds() -> None:
    assert input_loss(0.1, 0.1) == 0.0
    assert input_loss(0.1, 0.4) == pytest.approx(0.75)
    assert input_loss(0.2, 0.1) == 0.0  # faster than the baseline: no loss, never negative
    assert input_loss(0.1, 0.0) == 0.0  # nothing timed yet
    no_baseline = scripted(steps=5, wait_s=0.0, step_s=0.05, baseline=None)
    assert "input_loss_fraction" not in no_baseline and no_baseline["step_s_mean"] == pytest.approx(0.05)


def test_loader_reports_the_loss_and_keeps_the_baseline_over_a_reset(tmp_path, caplog) -> None:
    loader = Loader(make_dataset(str(tmp_path), [10, 10, 12], seq_len=32), global_batch_size=4, prefetch=2)
    with pytest.raises(ValueError, match="positive number of seconds"):
        loader.set_compute_baseline(0.0)
    loader.set_compute_baseline(0.01)
    logged = []
    log = MetricsLogger(loader, every=4)
    with caplog.at_level(logging.INFO, logger="fm_loader.metrics"):
        for step, _ in enumerate(loader):
            time.sleep(0.02)  # twice the baseline: about half the throughput is lost
            if log(step) is not None:
                logged.append(step)
    m = loader.metrics()
    assert m["step_s_mean"] >= 0.02
    assert m["input_loss_fraction"] == pytest.approx(1 - 0.01 / m["step_s_mean"])
    assert 0.4 <= m["input_loss_fraction"] < 1
    assert "throughput lost to input" in caplog.text and logged == [3, 7]
    loader.reset_metrics()
    assert loader.metrics()["compute_baseline_s"] == 0.01


def test_measure_compute_baseline_times_the_step() -> None:
    calls = []
    seconds = measure_compute_baseline(
        lambda b: (calls.append(b), time.sleep(0.01)), "batch", steps=5, warmup=2
    )
    assert len(calls) == 7 and 0.009 <= seconds < 0.1
    with pytest.raises(ValueError, match="steps must be positive"):
        measure_compute_baseline(lambda b: None, None, steps=0)
