"""Compute-log capture benchmark: what one Dagster run's log capture costs with Dagster's
``LocalComputeLogManager`` (``tail -F`` + a watcher process per stream) against ``ThreadedComputeLogManager``
(a follower thread per stream), in the same run.

    python bench/compute_logs.py [--reps 20] [--lines 200]

Each rep runs ``capture_logs`` around ``--lines`` lines of stdout and stderr, as a run does, in a child
process whose stdout and stderr are pipes (a terminal's place), alternating the two managers. Prints one JSON
object: per manager the median and min seconds per capture, the ratio of the medians, and whether every line
reached both the log file and the terminal.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, os, sys, time
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager
from fm_assets.defs.compute_logs import ThreadedComputeLogManager

kind, base, lines = sys.argv[1], sys.argv[2], int(sys.argv[3])
manager = (ThreadedComputeLogManager if kind == "threaded" else LocalComputeLogManager)(base_dir=base)
key = ["run", "compute_logs", "step"]
started = time.perf_counter()
with manager.capture_logs(key):
    for i in range(lines):
        print(f"line {i}", flush=True)
        sys.stderr.write(f"err {i}\\n"); sys.stderr.flush()
seconds = time.perf_counter() - started
out = open(manager.get_captured_local_path(key, "out")).read().count("\\n")
os.write(2, ("\\nRESULT " + json.dumps({"seconds": seconds, "file_lines": out})).encode())
"""


def one_capture(kind: str, lines: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="fm-bench-logs-") as base:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, kind, base, str(lines)],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[1],
        )
    result = json.loads(done.stderr.rsplit("RESULT ", 1)[1])
    result["terminal_lines"] = done.stdout.count("\n")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--lines", type=int, default=200)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"tail": [], "threaded": []}
    for _ in range(args.reps):
        for kind in runs:
            runs[kind].append(one_capture(kind, args.lines))
    report: dict = {"reps": args.reps, "lines": args.lines}
    for kind, results in runs.items():
        seconds = sorted(r["seconds"] for r in results)
        report[kind] = {
            "median_s": round(seconds[len(seconds) // 2], 4),
            "min_s": round(seconds[0], 4),
            "every_line_in_file": all(r["file_lines"] == args.lines for r in results),
            "every_line_on_terminal": all(r["terminal_lines"] == args.lines for r in results),
        }
    report["threaded_vs_tail"] = round(report["threaded"]["median_s"] / report["tail"]["median_s"], 3)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
