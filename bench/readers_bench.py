"""Benchmark the raw readers and the GX record validation; prints one JSON object.

Reader throughput is compared with a naive baseline measured in the same run (``for line in file:
json.loads(line)``, no checks, no bounded-memory splitting). GX overhead is given per 10k rows and
compared with the same checks written directly in pandas.

    python bench/readers_bench.py [--docs 200000] [--rows 10000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from fm_assets.transforms.readers import iter_raw_records


def _best_of(repeats: int, fn) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _make_docs(count: int) -> list[dict]:
    rng = random.Random(0)
    words = ["data", "model", "token", "shard", "loader", "dagster", "licence", "über", "naïve", "🙂"]
    return [
        {
            "text": " ".join(rng.choice(words) for _ in range(rng.randint(20, 400))),
            "url": f"https://e.org/{i}",
            "id": i,
        }
        for i in range(count)
    ]


def bench_readers(docs: int, folder: Path) -> dict:
    rows = _make_docs(docs)
    plain = b"".join(json.dumps(row, ensure_ascii=False).encode() + b"\n" for row in rows)
    files = {
        "jsonl": folder / "d.jsonl",
        "jsonl.gz": folder / "d.jsonl.gz",
        "jsonl.zst": folder / "d.jsonl.zst",
        "parquet": folder / "d.parquet",
    }
    files["jsonl"].write_bytes(plain)
    files["jsonl.gz"].write_bytes(gzip.compress(plain, compresslevel=6))
    files["jsonl.zst"].write_bytes(zstandard.ZstdCompressor(level=3).compress(plain))
    pq.write_table(pa.Table.from_pylist(rows), files["parquet"], row_group_size=50_000)

    def baseline() -> None:
        with open(files["jsonl"], "rb") as fh:
            for line in fh:
                json.loads(line)

    def read(path: Path) -> None:
        for _ in iter_raw_records(path):
            pass

    base = _best_of(3, baseline)
    result: dict = {
        "docs": docs,
        "jsonl_mb": round(len(plain) / 1e6, 1),
        "baseline_naive_jsonl_s": round(base, 3),
    }
    for fmt, path in files.items():
        seconds = _best_of(3, lambda p=path: read(p))
        result[fmt] = {
            "seconds": round(seconds, 3),
            "docs_per_s": round(docs / seconds),
            "mb_per_s_decoded": round(len(plain) / 1e6 / seconds, 1),
            "slowdown_vs_naive_jsonl": round(seconds / base, 2),
        }
    return result


def bench_gx(rows: int) -> dict:

    started = time.perf_counter()
    from fm_assets.transforms.text.validate import validate_records
    from fm_assets.transforms.text.validate_gx import gx_validate_records
    from fm_assets.transforms.text.validate_rules import NAMESPACES

    gx_validate_records(
        pa.table(
            {"doc_id": ["x"], "text": ["t"], "license": ["MIT"], "namespace": ["cloud"], "source": ["s"]}
        )
    )
    setup = time.perf_counter() - started
    table = pa.table(
        {
            "doc_id": [f"d{i}" for i in range(rows)],
            "text": [f"document {i} " * 50 for i in range(rows)],
            "license": ["Apache-2.0"] * rows,
            "namespace": ["cloud"] * rows,
            "source": ["web"] * rows,
        }
    )
    gx_seconds = _best_of(5, lambda: gx_validate_records(table))
    native_seconds = _best_of(5, lambda: validate_records(table))  # the same suite as units evaluate it

    def pandas_checks() -> None:
        frame = table.to_pandas()
        text = frame["text"]
        bad = text.isna() | ~text.fillna("").str.contains(r"\S")
        bad |= frame["license"].isna() | ~frame["license"].fillna("").str.match(
            r"^[A-Za-z0-9][A-Za-z0-9.+-]*$"
        )
        bad |= ~frame["namespace"].isin(NAMESPACES) | frame["source"].fillna("").eq("")
        bad |= frame["doc_id"].duplicated(keep=False)
        bad.to_numpy().nonzero()

    pandas_seconds = _best_of(5, pandas_checks)
    return {
        "rows": rows,
        "gx_import_and_context_setup_s": round(setup, 3),
        "suite_native_validate_s": round(native_seconds, 4),
        "gx_validate_s": round(gx_seconds, 4),
        "gx_s_per_10k_rows": round(gx_seconds * 10_000 / rows, 4),
        "pandas_same_checks_s": round(pandas_seconds, 4),
        "gx_overhead_ratio_vs_pandas": round(gx_seconds / pandas_seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fm-readers-bench-") as tmp:
        readers = bench_readers(args.docs, Path(tmp))
    print(json.dumps({"readers": readers, "great_expectations": bench_gx(args.rows)}, indent=2))


if __name__ == "__main__":
    main()
