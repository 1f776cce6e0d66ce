"""Exact dedup's decision: whole-column Arrow lookups (``exact_dedup.first_occurrences``, what
``ExactDedupStage.decide`` uses) against a Python dict of every earlier key (what it did before), same keys,
same run. Prints one JSON object.

    python bench/exact_dedup_lookup.py [--earlier 100000,1000000] [--batch 40000] [--reps 3]

Keys are random 16-byte content hashes as the kept-keys files hold them (already Arrow columns, as read
from Parquet); a batch repeats 5% of an earlier batch's keys and 5% of its own. Both sides find the same
duplicates; the JSON says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import pyarrow as pa

from fm_assets.engine.kinds.exact_dedup import first_occurrences


def random_keys(n: int) -> pa.FixedSizeBinaryArray:
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), n, [None, pa.py_buffer(os.urandom(16 * n))])


def with_dict(earlier: pa.Array, earlier_ids: pa.Array, keys: pa.ChunkedArray, ids: pa.ChunkedArray) -> int:
    seen: dict[bytes, tuple[str, str]] = {}
    for key, doc in zip(earlier.to_pylist(), earlier_ids.to_pylist(), strict=True):
        seen.setdefault(key, ("earlier", doc))
    duplicates = 0
    for doc, key in zip(ids.to_pylist(), keys.to_pylist(), strict=True):
        if seen.setdefault(key, ("this", doc)) != ("this", doc):
            duplicates += 1
    return duplicates


def with_arrow(earlier: pa.Array, keys: pa.ChunkedArray) -> int:
    in_earlier, first_row = first_occurrences(keys, earlier)
    return int(np.count_nonzero((in_earlier >= 0) | (first_row != np.arange(len(first_row)))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--earlier", default="100000,1000000", help="earlier kept keys, comma-separated sizes"
    )
    parser.add_argument("--batch", type=int, default=40000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    rows = []
    for n in [int(x) for x in args.earlier.split(",")]:
        earlier = random_keys(n)
        earlier_ids = pa.array([f"e{i}" for i in range(n)])
        fresh = args.batch - 2 * (args.batch // 20)
        own = random_keys(fresh)
        picks = [earlier.take(pa.array(rng.integers(0, n, args.batch // 20))), own]
        picks.append(own.take(pa.array(rng.integers(0, fresh, args.batch // 20))))
        keys = pa.chunked_array([pa.concat_arrays(picks)])
        ids = pa.chunked_array([pa.array([f"d{i}" for i in range(len(keys))])])
        timings: dict[str, list[float]] = {"dict": [], "arrow": []}
        found = {}
        for _ in range(args.reps):
            started = time.perf_counter()
            found["dict"] = with_dict(earlier, earlier_ids, keys, ids)
            timings["dict"].append(time.perf_counter() - started)
            started = time.perf_counter()
            found["arrow"] = with_arrow(earlier, keys)
            timings["arrow"].append(time.perf_counter() - started)
        dict_s, arrow_s = statistics.median(timings["dict"]), statistics.median(timings["arrow"])
        rows.append(
            {
                "earlier_keys": n,
                "batch_keys": len(keys),
                "dict_s": round(dict_s, 4),
                "arrow_s": round(arrow_s, 4),
                "arrow_vs_dict": round(arrow_s / dict_s, 3),
                "duplicates": found,
                "same_duplicates": found["dict"] == found["arrow"],
            }
        )
    print(json.dumps({"reps": args.reps, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
