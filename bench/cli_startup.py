"""CLI start-up benchmark: what an `fm` command that needs no Dagster pays to start, against the same command
with Dagster imported first (what opening the store through the Dagster resource used to cost), in one run.

    python bench/cli_startup.py [--reps 10] [--docs 200]

A root with one small landed batch is made first (``fm land`` of ``--docs`` generated documents). Then each rep
runs, alternated, ``fm report`` as users run it and the same command in an interpreter that imports Dagster
before it: each a fresh process, timed from outside (start to exit). Prints one JSON object: per variant the
median, min and max wall seconds and whether the command loaded Dagster, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the command, run as `python -m fm_assets.cli.main report`, reporting at exit which Dagster modules it loaded
RUN = """
import atexit, os, runpy, sys
{prelude}
atexit.register(lambda: os.write(2, ("\\nDAGSTER_LOADED " + str("dagster" in sys.modules) + "\\n").encode()))
sys.argv = ["fm", "report"]
runpy.run_module("fm_assets.cli.main", run_name="__main__")
"""
VARIANTS = {"fm report": "", "fm report, Dagster imported first": "import dagster"}


def run_once(code: str, env: dict[str, str]) -> tuple[float, bool]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"fm report failed: {done.stderr[-2000:]}")
    return seconds, "DAGSTER_LOADED True" in done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--docs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fm-cli-startup-") as work:
        root = Path(work, "root")
        env = {**os.environ, "FM_ROOT": str(root), "DAGSTER_HOME": str(Path(work, "dagster_home"))}
        docs = Path(work, "docs.jsonl")
        docs.write_text(
            "".join(json.dumps({"text": f"document {i}: " + "words " * 50}) + "\n" for i in range(args.docs))
        )
        subprocess.run([sys.executable, "-m", "fm_assets.cli.main", "land", str(docs), "--source", "bench",
                        "--license", "CC-BY-4.0"], env=env, cwd=REPO, check=True, capture_output=True)  # fmt: skip
        codes = {name: RUN.format(prelude=prelude) for name, prelude in VARIANTS.items()}
        for code in codes.values():  # warm the bytecode and page caches
            run_once(code, env)
        walls: dict[str, list[float]] = {name: [] for name in codes}
        loaded: dict[str, bool] = {}
        for _ in range(args.reps):
            for name, code in codes.items():
                seconds, dagster = run_once(code, env)
                walls[name].append(seconds)
                loaded[name] = dagster
    result = {
        name: {
            "median_s": round(statistics.median(w), 3),
            "min_s": round(min(w), 3),
            "max_s": round(max(w), 3),
            "dagster_loaded": loaded[name],
        }
        for name, w in walls.items()
    }
    plain, baseline = (statistics.median(w) for w in walls.values())
    print(
        json.dumps(
            {"reps": args.reps, "variants": result, "ratio_of_medians": round(plain / baseline, 3)}, indent=1
        )
    )


if __name__ == "__main__":
    main()
