"""Two reads a driver or a land unit makes, against what they replaced, in the same run; prints one JSON object.

* ``cas_copy``: a landed file into the CAS as ``store.put_file_hashed`` does it, copied and hashed in one read
  (``hashing.copy_with_sha256``), against hashing it and then copying it (``sha256_file`` + ``shutil.copyfile``,
  what land did before). Both must give the same digest and bytes.
* ``part_reads``: one column of every part of an output (pack's plan, the auxiliary outputs near_dedup and exact
  dedup read) with ``store.read_parquet_tables`` (threads, Arrow opening each path) against one fsspec handle
  after another. Both must give the same tables.

    python bench/driver_io.py [--file BIG_FILE] [--mb 300] [--parts 96] [--rows 300] [--reps 6]

Without ``--file`` a file of ``--mb`` MB of random bytes is generated; the parts are generated Parquet files
of ``--rows`` rows each, in a temp root. Copies go to a temp folder on the same disk as the temp root.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine.hashing import copy_with_sha256, sha256_file
from fm_assets.engine.store import ObjectStore, read_parquet_tables


def hash_then_copy(src: Path, dst: Path) -> str:
    sha = sha256_file(src)
    shutil.copyfile(src, dst)
    return sha


def one_after_another(store: ObjectStore, rels: list[str], columns: list[str]) -> list[pa.Table]:
    tables = []
    for rel in rels:
        with store.open(rel) as handle:
            tables.append(pq.read_table(handle, columns=columns))
    return tables


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def summary(new: list[float], old: list[float]) -> dict:
    return {
        "new_s": [round(s, 4) for s in new],
        "old_s": [round(s, 4) for s in old],
        "ratio_median": round(statistics.median(new) / statistics.median(old), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path)
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--parts", type=int, default=96)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--reps", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = args.file
        if source is None:
            source = folder / "landed.bin"
            with source.open("wb") as out:
                for _ in range(args.mb):
                    out.write(os.urandom(1_000_000))
        copies: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.reps):  # alternated; each copy removed before the next
            for fn, seconds in ((copy_with_sha256, copies[0]), (hash_then_copy, copies[1])):
                target = folder / "copy"
                took, digest = timed(lambda fn=fn, target=target: fn(source, target))
                seconds.append(took)
                if digest != sha256_file(target) or target.stat().st_size != source.stat().st_size:
                    raise SystemExit(f"{fn.__name__}: the copy is not the file")
                target.unlink()

        store = ObjectStore(str(folder / "root"))
        rng = np.random.default_rng(7)
        rels = []
        for i in range(args.parts):
            rel = f"stages/tokenize/b/k/part-g{i:05d}.parquet"
            store.local_path(rel).parent.mkdir(parents=True, exist_ok=True)
            table = pa.table(
                {
                    "doc_id": [hashlib.sha256(f"{i}/{r}".encode()).hexdigest() for r in range(args.rows)],
                    "n_tokens": pa.array(rng.integers(1, 5000, args.rows), pa.int32()),
                }
            )
            pq.write_table(table, store.local_path(rel), compression="zstd")
            rels.append(rel)
        reads: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.reps * 2):
            took_new, new = timed(lambda: read_parquet_tables(store, rels, columns=["n_tokens"]))
            took_old, old = timed(lambda: one_after_another(store, rels, ["n_tokens"]))
            reads[0].append(took_new)
            reads[1].append(took_old)
            if not all(a.equals(b) for a, b in zip(new, old, strict=True)):  # type: ignore[arg-type]
                raise SystemExit("read_parquet_tables read other tables")
        print(
            json.dumps(
                {
                    "cpus": os.cpu_count(),
                    "file_mb": round(source.stat().st_size / 1e6, 1),
                    "cas_copy": summary(*copies),
                    "parts": args.parts,
                    "part_reads": summary(*reads),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
