"""Loader throughput, input stall and cache counters, and a hook that logs them every N steps.

The headline is ``input_loss_fraction``: the share of the trainer's throughput lost to input, ``1 - compute-only
step time / measured step time``, where the measured step time is the mean interval between the trainer's
requests for a batch and the compute-only step time is what the trainer measured on device-resident batches
(:func:`measure_compute_baseline`) and gave to ``Loader.set_compute_baseline``. It counts every way input
slows a step, including decode workers taking the CPU the training loop needs, which the wait time cannot
see (a trainer can lose 25% of its throughput while waiting only 4% of the time). With an asynchronous device
step the interval between requests converges to the device's step time once its queue is full, so the mean is
taken over all steps after the first.

The input stall is the time the consumer spent blocked in ``__next__`` waiting for a batch; its fraction is
that time over the time since the consumer first asked for one. The queue depth is, averaged over steps, how
many batches were already built and waiting when the consumer asked (0: every step waited on a build). Build
times come from whichever process built the batch (the prefetch thread or a ``DataLoader`` worker); with
workers, each batch carries its worker's build time and cache counters back, so they are counted too.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from fm_loader.storage import CacheStats

logger = logging.getLogger(__name__)

_ASKS_KEPT = 256  # steps back a late-arriving batch can still count as queued (more than any prefetch depth)


@dataclass
class LoaderMetrics:
    rows: int = 0
    tokens: int = 0
    bytes: int = 0
    batches: int = 0
    wait_s: float = 0.0  # time the consumer spent blocked waiting for the next batch: the input stall
    build_s: float = 0.0  # time spent building the batches handed out (in this process or in workers)
    corrupt_rows_skipped: int = 0  # rows made padding: corrupt, or in a missing shard (skip_corrupt)
    lost_rows: int = 0  # of those, rows whose shard or row index could not be opened
    started: float | None = None  # monotonic time of the consumer's first request
    worker_cache: CacheStats = field(default_factory=CacheStats)  # cache counters of DataLoader workers
    compute_baseline_s: float | None = None  # the trainer's compute-only step time, when it measured one
    step_s_total: float = (
        0.0  # sum of the intervals between consecutive requests (one per step after the first)
    )
    steps_timed: int = 0
    clock: Callable[[], float] = time.monotonic
    _asks: deque[float] = field(default_factory=lambda: deque(maxlen=_ASKS_KEPT))
    _queued: int = 0  # sum over steps of the batches waiting when the step asked

    def ask(self) -> float:
        """The consumer asks for a batch now; returns the time."""
        now = self.clock()
        if self.started is None:
            self.started = now
        if self._asks:
            self.step_s_total += now - self._asks[-1]
            self.steps_timed += 1
        self._asks.append(now)
        return now

    def fresh(self) -> LoaderMetrics:
        """New counters that keep the compute baseline and the clock."""
        return replace(LoaderMetrics(), compute_baseline_s=self.compute_baseline_s, clock=self.clock)

    def handed(self, asked_at: float, built_at: float, build_s: float) -> None:
        """The batch asked for at ``asked_at`` arrived; it was finished at ``built_at`` after ``build_s``.

        It was waiting in the queue at every recent step that asked after it was built: those steps had one
        more batch ready.
        """
        self.wait_s += self.clock() - asked_at
        self.build_s += build_s
        self._queued += sum(1 for t in self._asks if t >= built_at)

    def snapshot(self, cache_stats: CacheStats | None = None) -> dict[str, float]:
        now = self.clock()
        elapsed = max(now - self.started, 1e-9) if self.started is not None else 1e-9
        step_s = self.step_s_total / self.steps_timed if self.steps_timed else 0.0
        out = {
            "rows": self.rows,
            "tokens": self.tokens,
            "bytes": self.bytes,
            "batches": self.batches,
            "elapsed_s": elapsed,
            "rows_per_s": self.rows / elapsed,
            "tokens_per_s": self.tokens / elapsed,
            "bytes_per_s": self.bytes / elapsed,
            "input_stall_s": self.wait_s,
            "input_stall_fraction": min(1.0, self.wait_s / elapsed),
            "queue_depth_mean": self._queued / self.batches if self.batches else 0.0,
            "build_s": self.build_s,
            "step_s_mean": step_s,
            "corrupt_rows_skipped": self.corrupt_rows_skipped,
            "lost_rows": self.lost_rows,
        }
        if self.compute_baseline_s is not None:
            out["compute_baseline_s"] = self.compute_baseline_s
            out["input_loss_fraction"] = input_loss(self.compute_baseline_s, step_s)
        if cache_stats is not None:
            total = cache_stats.plus(self.worker_cache)
            looked_up = total.hits + total.misses
            out.update(
                cache_hits=total.hits,
                cache_misses=total.misses,
                cache_hit_rate=total.hits / looked_up if looked_up else 1.0,
                cache_bytes_downloaded=total.bytes_downloaded,
                cache_fetch_wait_s=total.wait_s,
                cache_prewarmed=total.prewarmed,
                cache_evictions=total.evictions,
            )
        return out


def input_loss(compute_s: float, step_s: float) -> float:
    """Share of throughput lost to input: ``1 - compute_s / step_s`` in [0, 1] (0 before a step was timed)."""
    if step_s <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - compute_s / step_s))


def measure_compute_baseline(
    step: Callable[[Any], Any], batch: Any, steps: int = 20, warmup: int = 3
) -> float:
    """Seconds per call of ``step(batch)`` on one batch already on the device: the trainer's compute-only step.

    Run it once before training (or every few thousand steps) and give the result to
    ``Loader.set_compute_baseline``. CUDA work is synchronised before and after the timed steps.
    """
    if steps <= 0:
        raise ValueError(f"steps must be positive, got {steps}")
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        step(batch)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step(batch)
    sync()
    return (time.perf_counter() - t0) / steps


def cache_delta(now: CacheStats, before: CacheStats) -> dict[str, float]:
    """What ``now`` counted since ``before`` (as a plain dict, to travel back from a worker process)."""
    return {f.name: getattr(now, f.name) - getattr(before, f.name) for f in fields(CacheStats)}


class MetricsLogger:
    """Logs (or hands to ``sink``) a loader's :meth:`~fm_loader.loader.Loader.metrics` every ``every`` steps.

    Call it once per training step::

        log_metrics = fm_loader.MetricsLogger(loader, every=100)
        for step, batch in enumerate(loader):
            train_step(batch)
            log_metrics(step)

    Args:
        loader: Anything with a ``metrics()`` method returning a dict of numbers.
        every: Steps between reports.
        sink: Called with the metrics dict instead of logging (e.g. an experiment tracker's ``log``).
    """

    def __init__(
        self, loader: Any, every: int = 100, sink: Callable[[dict[str, float]], None] | None = None
    ) -> None:
        if every <= 0:
            raise ValueError(f"every must be a positive number of steps, got {every}")
        self.loader = loader
        self.every = every
        self.sink = sink

    def __call__(self, step: int) -> dict[str, float] | None:
        """Report if ``step + 1`` is a multiple of ``every``; returns what was reported, else None."""
        if (step + 1) % self.every:
            return None
        metrics = self.loader.metrics()
        if self.sink is not None:
            self.sink(metrics)
        else:
            loss = metrics.get("input_loss_fraction")
            logger.info(
                "step %d: throughput lost to input %s (step %.1f ms), input stall %.1f%% (%.2f s), "
                "%.0f tokens/s, %.1f rows/s, queue depth %.2f, "
                "cache hit rate %.3f, %d bytes fetched, fetch wait %.2f s",
                step + 1,
                "n/a (no compute baseline)" if loss is None else f"{100 * loss:.1f}%",
                1000 * metrics.get("step_s_mean", 0.0),
                100 * metrics["input_stall_fraction"],
                metrics["input_stall_s"],
                metrics["tokens_per_s"],
                metrics["rows_per_s"],
                metrics["queue_depth_mean"],
                metrics.get("cache_hit_rate", 1.0),
                metrics.get("cache_bytes_downloaded", 0),
                metrics.get("cache_fetch_wait_s", 0.0),
            )
        return metrics
