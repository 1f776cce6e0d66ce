"""Do worker processes help? Text tokens/s and media images/s in process vs 1 and 2 workers; prints one JSON object.

Usage: ``python bench/workers.py [--rows 8192] [--seq-len 2048] [--images 512] [--batch 32] [--workers 1,2]
[--repeats 5] [--prefetch 2] [--skip-media] [--trainer-cpu-ms 0]``.

For each kind, every configuration runs one epoch per round, rounds repeated ``--repeats`` times, and each
configuration's steady-state rate (from the first batch received to the end of the epoch; the wait for the
first batch, worker start-up, is reported apart as ``first_batch_s_median``) is the median over rounds, with ratios against the in-process run of the same
round (so a burst of load on a shared machine hits both sides). Configurations: ``in_process`` (prefetch thread,
``num_workers=0``), and for each worker count the two hand-overs: ``shm`` (the shared-memory ring, the default)
and ``pickle`` (torch's own queue: the hand-over before the ring). The trainer does nothing but touch each batch,
so the numbers are the loader's throughput.

``--trainer-cpu-ms N`` adds ``media_with_trainer``: a trainer whose step needs N ms of CPU (its thread spins
on its own CPU time, as a GPU trainer's thread launches kernels and spin-waits on them) fed by the media
loader, each worker count with the workers at each ``--worker-nice`` value (0: the trainer's priority; 10:
below it), interleaved; ``fraction_of_compute_only`` is the step rate kept against the same spin alone. Shards are generated (bench/loader.py's token rows; bench/
media_loader.py's JPEGs, 320 to 640 px long side, bucketed to ~256x256) and read from page cache.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # a sibling script named like a standard module must not shadow it

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fm_loader import Loader


def _sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PREFETCH = [2]


def epoch(source: str, batch: int, workers: int, handover: str, count_key: str) -> tuple[float, int, float]:
    """Steady-state seconds of one epoch (from the first batch received to the end), what those batches counted
    (tokens or valid images), and the seconds to the first batch (worker start-up)."""
    count, first = 0, None
    t0 = time.perf_counter()
    prefetch = PREFETCH[0]
    with Loader(source, batch, seed=0, num_workers=workers, prefetch=prefetch, handover=handover) as loader:
        for b in loader:
            if first is None:
                first = time.perf_counter()
                continue
            count += int(b[count_key].sum())
    assert first is not None, "the epoch had one batch or none: give more rows or images"
    return time.perf_counter() - first, count, first - t0


def spin(seconds: float) -> None:
    """Burn ``seconds`` of this thread's CPU time (wall time grows when the CPU is taken by others)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def trainer_epoch(
    source: str, images: int, batch: int, workers: int, nice: int, cpu_s: float, steps: int
) -> float:
    """Steps per second of a trainer spinning ``cpu_s`` of CPU per batch, fed by a media loader (after the
    first batch)."""
    epochs = -(-(steps + 2) // max(1, images // batch - 8)) + 1  # every bucket's last batch may be short
    with Loader(source, batch, seed=0, epochs=epochs, num_workers=workers, worker_nice=nice) as loader:
        it = iter(loader)
        next(it)
        t0 = time.perf_counter()
        for _ in range(steps):
            next(it)
            spin(cpu_s)
        seconds = time.perf_counter() - t0
        close = getattr(it, "close", None)
        if close is not None:
            close()
    return steps / seconds


def with_trainer(
    source: str,
    images: int,
    batch: int,
    workers: list[int],
    nices: list[int],
    repeats: int,
    cpu_ms: float,
    steps: int,
) -> dict[str, Any]:
    kept: dict[str, list[float]] = {f"{n}_workers_nice_{k}": [] for n in workers for k in nices}
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            spin(cpu_ms / 1000)
        alone = steps / (time.perf_counter() - t0)
        for n in workers:
            for k in nices:
                kept[f"{n}_workers_nice_{k}"].append(
                    trainer_epoch(source, images, batch, n, k, cpu_ms / 1000, steps) / alone
                )
    return {
        "trainer_cpu_ms": cpu_ms,
        "steps": steps,
        "fraction_of_compute_only_median": {k: round(statistics.median(v), 3) for k, v in kept.items()},
        "fraction_of_compute_only": {k: [round(x, 3) for x in v] for k, v in kept.items()},
    }


def measure(source: str, batch: int, workers: list[int], repeats: int, count_key: str) -> dict[str, Any]:
    configs = [("in_process", 0, "shm")] + [
        (f"{n}_workers_{h}", n, h) for n in workers for h in ("shm", "pickle")
    ]
    rates: dict[str, list[float]] = {name: [] for name, _, _ in configs}
    startup: dict[str, list[float]] = {name: [] for name, _, _ in configs}
    ratios: dict[str, list[float]] = {name: [] for name, _, _ in configs[1:]}
    for _name, n, h in configs:  # warm-up: page cache, imports, first fork
        epoch(source, batch, n, h, count_key)
    for _ in range(repeats):
        round_rates = {}
        for name, n, h in configs:
            seconds, count, first_s = epoch(source, batch, n, h, count_key)
            startup[name].append(first_s)
            round_rates[name] = count / seconds
            rates[name].append(count / seconds)
        for name in ratios:
            ratios[name].append(round_rates[name] / round_rates["in_process"])
    return {
        "per_s_median": {k: round(statistics.median(v), 1) for k, v in rates.items()},
        "first_batch_s_median": {k: round(statistics.median(v), 3) for k, v in startup.items()},
        "ratio_to_in_process_median": {k: round(statistics.median(v), 3) for k, v in ratios.items()},
        "shm_over_pickle_median": {
            f"{n}_workers": round(
                statistics.median(
                    s / p
                    for s, p in zip(rates[f"{n}_workers_shm"], rates[f"{n}_workers_pickle"], strict=True)
                ),
                3,
            )
            for n in workers
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--prefetch", type=int, default=2, help="Loader(prefetch=): per worker with workers")
    parser.add_argument("--skip-media", action="store_true")
    parser.add_argument(
        "--trainer-cpu-ms", type=float, default=0.0, help="add media_with_trainer (see above)"
    )
    parser.add_argument("--trainer-steps", type=int, default=60)
    parser.add_argument("--worker-nice", default="0,10", help="media_with_trainer: the workers' nice values")
    args = parser.parse_args()
    PREFETCH[0] = args.prefetch
    workers = [int(w) for w in args.workers.split(",")]
    out: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "prefetch": args.prefetch,
        "load_avg_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="fm-bench-workers-") as tmp:
        text_dir = Path(tmp) / "text"
        text_dir.mkdir()
        manifest, _ = _sibling("loader").build(str(text_dir), args.rows, args.seq_len, 16)
        out["text"] = {
            "rows": args.rows,
            "seq_len": args.seq_len,
            "batch": args.batch,
            "unit": "tokens",
            **measure(manifest, args.batch, workers, args.repeats, "valid_token_count"),
        }
        if not args.skip_media:
            media_dir = Path(tmp) / "media"
            media_dir.mkdir()
            media_manifest, _ = _sibling("media_loader").write_shards(media_dir, args.images, 8)
            out["media"] = {
                "images": args.images,
                "batch": args.batch,
                "unit": "images",
                **measure(str(media_manifest), args.batch, workers, args.repeats, "valid"),
            }
            if args.trainer_cpu_ms > 0:
                out["media_with_trainer"] = with_trainer(
                    str(media_manifest),
                    args.images,
                    args.batch,
                    workers,
                    [int(k) for k in args.worker_nice.split(",")],
                    args.repeats,
                    args.trainer_cpu_ms,
                    args.trainer_steps,
                )
    out["load_avg_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
