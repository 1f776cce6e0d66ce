"""Land's plan scan of a big JSONL file against the same work done one pass after another; prints one JSON object.

``scan_line_ranges`` reads the file once and hashes it whole and range by range on two threads beside the
read. The baseline in the same run does what it replaced: the same single pass with the newline count and
both hashes in one thread. Both must give the same digests.

    python bench/land_plan.py [--file FILE.jsonl] [--mb 100] [--pieces 15] [--reps 3]

Without ``--file`` a JSONL file of about ``--mb`` MB of mixed-length lines is generated in a temp folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fm_assets.transforms.readers.compressed import READ_CHUNK
from fm_assets.transforms.readers.line_ranges import LineScan, scan_line_ranges


def generated(folder: Path, megabytes: int) -> Path:
    """Lines of 50 B to 200 kB (most short, a few long), about ``megabytes`` MB in all."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(5000)]
    path = folder / "plan.jsonl"
    with path.open("w") as out:
        written = 0
        while written < megabytes * 1_000_000:
            n = int(rng.paretovariate(1.2) * 20)
            line = json.dumps({"text": " ".join(rng.choices(words, k=min(n, 40_000)))}) + "\n"
            out.write(line)
            written += len(line)
    return path


def sequential(path: Path, scan: LineScan) -> tuple[float, list[str], str]:
    """What the scan did before its hash threads: one pass in one thread, each chunk counted for newlines,
    fed to the whole file's sha256 and to the sha256 of the range(s) it falls in (the cuts taken from
    ``scan``, which found them the same way)."""
    started = time.perf_counter()
    whole, part = hashlib.sha256(), hashlib.sha256()
    ends = [r.end for r in scan.ranges]
    parts: list[str] = []
    position = lines = 0
    with path.open("rb") as raw:
        while chunk := raw.read(READ_CHUNK):
            view = memoryview(chunk)
            whole.update(view)
            lines += chunk.count(b"\n")
            fed = 0
            while ends and ends[0] <= position + len(chunk):
                cut = ends.pop(0) - position
                part.update(view[fed:cut])
                parts.append(part.hexdigest())
                part, fed = hashlib.sha256(), cut
            part.update(view[fed:])
            position += len(chunk)
    return time.perf_counter() - started, parts, whole.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--pieces", type=int, default=15)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or generated(Path(tmp), args.mb)
        size = path.stat().st_size
        threaded, baseline = [], []
        for _ in range(args.reps):  # alternated, after one read that warms the page cache
            with path.open("rb") as handle:
                started = time.perf_counter()
                scan = scan_line_ranges(handle, size, args.pieces)
                threaded.append(time.perf_counter() - started)
            seconds, parts, whole = sequential(path, scan)
            baseline.append(seconds)
            if parts != [r.sha256 for r in scan.ranges] or whole != scan.sha256:
                raise SystemExit("the threaded scan's digests differ from the sequential ones")
        print(
            json.dumps(
                {
                    "file_mb": round(size / 1e6, 1),
                    "ranges": len(scan.ranges),
                    "cpus": os.cpu_count(),
                    "scan_s": [round(s, 4) for s in threaded],
                    "sequential_s": [round(s, 4) for s in baseline],
                    "ratio_median": round(statistics.median(threaded) / statistics.median(baseline), 3),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
