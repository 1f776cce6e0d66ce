"""Read receipts cost nothing a trainer notices, and a deep step traces in well under a second; prints JSON.

Usage: ``python bench/receipts.py [--rows 8192] [--seq-len 2048] [--batch 32] [--repeats 5] [--step-ms 0]``

An epoch of ``Loader(..., prefetch=2)`` over the same shards (``bench/loader.py``'s ``build``) is read twice per
round, once plain and once with ``run_id=`` and ``receipts=`` set, calling ``state_dict()`` after every
``--checkpoint-every`` batches (default 1, a checkpoint per step: the worst case; real trainers checkpoint every
few hundred steps), each queuing one receipt. The two are run in turn for ``--repeats`` rounds; ``ratio`` is receipts / plain mean step
time within a round, and the median over rounds is reported (a burst of load on a shared machine hits both
sides of a round). ``--step-ms`` sleeps per batch to stand in for the training step. The receipts land in a
temporary local root; ``receipts_written`` counts them.

``trace_locate``: ``fm trace``'s step -> shard row math (``fm_assets.reports.trace.locate``, a Loader over the
manifest and one ``GlobalStream.rows`` call) on a plan-only manifest of ``--trace-shards`` shards of 4096 rows
(``bench/loader.py``'s ``synthetic_manifest``: no shard file exists, none is read) at a step near the end of
the first epoch and at one in epoch 3; median of ``--repeats`` seconds each. The rest of a trace (reading the
row's doc ids and each document's landed record) reads a few small parquet files, whatever the step.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # as in bench/loader.py: a sibling script must not shadow a standard module

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from fm_loader import Loader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loader import build, synthetic_manifest  # bench/loader.py's writers

sys.path.pop(0)


def epoch(manifest: str, batch: int, step_s: float, every: int, **receipts: Any) -> tuple[float, int]:
    """(mean seconds per step, steps) of one epoch, with a checkpoint after every ``every`` steps."""
    with Loader(manifest, global_batch_size=batch, seed=0, prefetch=2, **receipts) as loader:
        steps = 0
        t0 = time.perf_counter()
        for _ in loader:
            if step_s:
                time.sleep(step_s)
            steps += 1
            if steps % every == 0:
                loader.state_dict()
        elapsed = time.perf_counter() - t0
    return elapsed / steps, steps


def trace_locate(folder: str, shards: int, batch: int, repeats: int) -> dict[str, Any]:
    """Median seconds of ``trace.locate`` at a deep step of a large plan-only manifest."""
    from fm_assets.reports.trace import locate

    manifest = synthetic_manifest(folder, shards)
    per_epoch = -(-shards * 4096 // batch)
    found: dict[str, Any] = {"shards": shards, "rows": shards * 4096, "global_batch_size": batch}
    for label, step in (("last_step_of_epoch_0", per_epoch - 1), ("step_in_epoch_3", 3 * per_epoch + 12345)):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            located = locate(
                manifest, step=step, rank=3, row=7, global_batch_size=batch, world_size=8, seed=1
            )
            times.append(time.perf_counter() - t0)
        found[label] = {
            "step": step,
            "seconds_median": round(statistics.median(times), 4),
            "shard": located.shard,
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--step-ms", type=float, default=0.0)
    parser.add_argument("--checkpoint-every", type=int, default=1)
    parser.add_argument("--trace-shards", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        manifest, _ = build(folder, args.rows, args.seq_len, args.shards)
        root = Path(folder) / "root"
        epoch(manifest, args.batch, 0, 1)  # warm the page cache
        plain, with_receipts, ratios = [], [], []
        steps = 0
        for r in range(args.repeats):
            a, steps = epoch(manifest, args.batch, args.step_ms / 1000, args.checkpoint_every)
            b, _ = epoch(
                manifest,
                args.batch,
                args.step_ms / 1000,
                args.checkpoint_every,
                run_id=f"bench-{r}",
                receipts=str(root),
            )
            plain.append(a)
            with_receipts.append(b)
            ratios.append(b / a)
        written = sum(1 for _ in (root / "receipts").rglob("*.json"))
        traced = trace_locate(folder, args.trace_shards, 1024, args.repeats)
    print(
        json.dumps(
            {
                "bench": "receipts",
                "rows": args.rows,
                "seq_len": args.seq_len,
                "batch": args.batch,
                "steps_per_epoch": steps,
                "step_ms": args.step_ms,
                "checkpoint_every_steps": args.checkpoint_every,
                "plain_step_ms_median": round(statistics.median(plain) * 1000, 3),
                "receipts_step_ms_median": round(statistics.median(with_receipts) * 1000, 3),
                "ratio_median": round(statistics.median(ratios), 4),
                "ratios": [round(x, 4) for x in ratios],
                "receipts_written": written,
                "trace_locate": traced,
                "load_avg": os.getloadavg()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
