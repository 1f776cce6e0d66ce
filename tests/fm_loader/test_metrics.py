"""Input stall, queue depth, build time and cache counters, from the prefetch thread and from worker processes."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import fsspec
import pytest
from loader_helpers import make_dataset

from fm_loader import Loader, MetricsLogger


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(str(tmp_path_factory.mktemp("metrics")), [10, 10, 12], seq_len=32)


def drain(loader: Loader, pause_s: float = 0.0) -> int:
    steps = 0
    for _ in loader:
        time.sleep(pause_s)  # the trainer's step
        steps += 1
    return steps


def test_building_on_demand_stalls_for_every_build_and_queues_nothing(dataset):
    loader = Loader(dataset, global_batch_size=4, prefetch=0)
    drain(loader)
    m = loader.metrics()
    assert m["batches"] == 8 and m["queue_depth_mean"] == 0
    assert m["input_stall_s"] >= m["build_s"] > 0
    assert m["tokens_per_s"] > 0 and m["rows_per_s"] > 0


def test_a_prefetch_thread_ahead_of_a_slow_trainer_keeps_batches_queued(dataset):
    loader = Loader(dataset, global_batch_size=4, prefetch=2)
    drain(loader, pause_s=0.05)
    m = loader.metrics()
    assert m["queue_depth_mean"] >= 1  # after the first step, the next batch is always ready
    assert m["input_stall_fraction"] < 0.5 and m["build_s"] > 0
    assert m["rows"] == 32


@pytest.mark.slow
def test_worker_processes_report_build_time_tokens_and_cache_counters(tmp_path):
    local = make_dataset(str(tmp_path / "ds"), [8] * 4, seq_len=32)
    fs = fsspec.filesystem("memory")
    for root, _, files in os.walk(tmp_path / "ds"):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), tmp_path / "ds")
            fs.pipe(f"/mbucket/ds/{rel}", Path(os.path.join(root, name)).read_bytes())
    remote = "memory://mbucket/ds/manifest.json"
    inline = Loader(local, global_batch_size=4, prefetch=0)
    drain(inline)
    workers = Loader(remote, global_batch_size=4, num_workers=2, cache_dir=str(tmp_path / "cache"))
    drain(workers)
    m = workers.metrics()
    assert m["tokens"] == inline.metrics()["tokens"] and m["rows"] == 32 and m["build_s"] > 0
    assert m["cache_misses"] >= 8 and m["cache_bytes_downloaded"] > 0  # every shard, fetched in the workers
    assert workers.cache.stats.misses == 0  # none of it in the main process
    fs.rm("/mbucket", recursive=True)


def test_the_metrics_hook_reports_every_n_steps(dataset, caplog):
    loader = Loader(dataset, global_batch_size=4, prefetch=0)
    seen: list[dict[str, float]] = []
    hook = MetricsLogger(loader, every=3, sink=seen.append)
    reports = [hook(step) for step, _ in enumerate(loader)]
    assert [r is not None for r in reports] == [False, False, True, False, False, True, False, False]
    assert [m["batches"] for m in seen] == [3, 6]
    with caplog.at_level(logging.INFO, logger="fm_loader.metrics"):
        logged = MetricsLogger(loader, every=1)(0)
    assert logged is not None and "input stall" in caplog.text and "tokens/s" in caplog.text
    with pytest.raises(ValueError, match="positive number of steps"):
        MetricsLogger(loader, every=0)
