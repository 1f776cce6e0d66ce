"""Land's plan of a big JSONL file: cut from the manifest's line index against the plan that reads the file; prints one JSON object.

The file is landed once (``land_batch``: the manifest entry gets its line index from the read that hashes
it). Then, alternated, ``--reps`` times each: ``stages.land.line_spans`` with the manifest's index (reads
the head bytes only) and with ``use_index=False`` (what a manifest without an index costs: one read, the
whole file's sha256 and each chunk's on two threads). Both must give the same spans. Also reported: what
the index costs ``fm land``: its copy of the file into the batch with the index taken on the way
(``_copy_walked``) against the same copy without it.

    python bench/land_plan.py [--file FILE.jsonl] [--mb 100] [--unit-mb 8] [--reps 3]

Without ``--file`` a JSONL file of about ``--mb`` MB of mixed-length lines is generated in a temp folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fm_assets.engine import landing, layout
from fm_assets.engine.landing import _copy_walked, land_batch, select_source_files
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.land import line_spans


def generated(folder: Path, megabytes: int) -> Path:
    """Lines of 50 B to 200 kB (most short, a few long), about ``megabytes`` MB in all."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(5000)]
    path = folder / "src" / "plan.jsonl"
    path.parent.mkdir()
    with path.open("w") as out:
        written = 0
        while written < megabytes * 1_000_000:
            n = int(rng.paretovariate(1.2) * 20)
            line = json.dumps({"text": " ".join(rng.choices(words, k=min(n, 40_000)))}) + "\n"
            out.write(line)
            written += len(line)
    return path


def timed(fn) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def copy_without_index(store: ObjectStore, source, sha: str) -> None:
    before = landing.INDEX_EVERY
    landing.INDEX_EVERY = source.size + 1  # the file is not indexed: the copy fm land did before
    try:
        assert _copy_walked(store, source, "copy/plain", sha) is None
    finally:
        landing.INDEX_EVERY = before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--unit-mb", type=int, default=8, help="land_unit_bytes in MB (the default 8)")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or generated(Path(tmp), args.mb)
        store = ObjectStore(str(Path(tmp) / "root"))
        manifest = land_batch(store, path, source="bench", license_id="MIT", namespace="cloud", batch_id="b")
        (entry,) = manifest.files
        raw_rel = layout.landed_file(manifest.batch, entry["path"])
        (source,), _ = select_source_files(path)
        unit_bytes = args.unit_mb * 1_000_000
        indexed, read, copy_indexed, copy_plain = [], [], [], []
        for _ in range(args.reps):  # alternated, after the landing read warmed the page cache
            seconds, from_index = timed(lambda: line_spans(store, raw_rel, entry, unit_bytes))
            indexed.append(seconds)
            seconds, from_read = timed(lambda: line_spans(store, raw_rel, entry, unit_bytes, use_index=False))
            read.append(seconds)
            if from_index != from_read or not from_index:
                raise SystemExit("the plan from the manifest's index and the plan that reads the file differ")
            copy_indexed.append(
                timed(lambda: _copy_walked(store, source, "copy/indexed", entry["sha256"]))[0]
            )
            copy_plain.append(timed(lambda: copy_without_index(store, source, entry["sha256"]))[0])
        print(
            json.dumps(
                {
                    "file_mb": round(entry["bytes"] / 1e6, 1),
                    "index_chunks": len(entry["line_index"]["starts"]),
                    "manifest_index_kb": round(len(json.dumps(entry["line_index"])) / 1e3, 1),
                    "spans": len(from_index),
                    "cpus": os.cpu_count(),
                    "plan_from_index_s": [round(s, 4) for s in indexed],
                    "plan_reading_file_s": [round(s, 4) for s in read],
                    "plan_ratio_median": round(statistics.median(indexed) / statistics.median(read), 4),
                    "fm_land_copy_indexing_s": [round(s, 4) for s in copy_indexed],
                    "fm_land_copy_s": [round(s, 4) for s in copy_plain],
                    "fm_land_copy_ratio_median": round(
                        statistics.median(copy_indexed) / statistics.median(copy_plain), 3
                    ),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
