"""Fixed-cost benchmark: what one ``fm run`` of one small batch pays outside its stages' unit work.

    python bench/fixed_costs.py [--workdir DIR] [--docs 100] [--warm-docs 300] [--reps 3] [--workers 1]
                                [--profile] [--warm-corpus FILE]

A root is warmed first (one batch of ``--warm-docs`` held-out documents landed and run: tokenizer pinned,
side inputs built, Dagster instance created; ``--warm-corpus FILE``: the documents of a JSONL file instead,
for a root that already holds a large batch), then ``--reps`` batches of ``--docs`` other documents are
each landed and run (``fm run <batch>``: the batch's stages, then the release, the card and the views),
each a fresh ``fm run`` process, the way the landing sensor runs a new batch. Then ``--backfill-batches``
batches are landed and run by one ``fm run`` (one process, one release, as a backfill runs them):
``backfill.fixed_s_per_batch`` is what each of them paid outside unit work. Per run it reports the wall,
the sum of the batch's stage walls and unit seconds (from its refs and ``_SUCCESS.json``), and:

* ``fixed_s``: wall minus the stages' unit seconds: everything the run pays that is not unit work
  (process start, Dagster run set-up and events, stage drivers, release, card, views). Target <= 3 s.
* ``outside_stages_s``: wall minus the stages' walls (run set-up, release, card, views).
* ``driver_s``: the stages' own non-unit seconds (planning, upstream checks, commit).
* ``batch_path_fixed_s``: ``fixed_s`` without the release run: what the batch's own path pays (start-up and
  its preprocess Dagster run) outside unit work. The daemon's ``release_after_preprocess`` sensor coalesces
  releases (one release run covers every batch that finished before it), as one ``fm run`` of a backfill does.
* ``timeline``: where the rest goes, from the Dagster event log of the run's two Dagster runs (preprocess,
  release): process start to the first run's creation (imports, CLI, instance, definitions), each run's
  set-up (creation to RUN_START: its event shard, planned-asset events), its steps (and, for preprocess,
  Dagster's seconds around the stages: step wall minus stage wall), the gaps between steps, the time
  between the two runs and from the last run's end to the process exit; the release's steps by name.

``--profile`` runs each measured ``fm run`` under cProfile (``<workdir>/fixed_costs-<rep>.prof``; the
profiler inflates every figure, so the JSON's timings then are not the headline ones). Documents, the
tokenizer and the per-stage split come from ``bench/scale.py``'s helpers. Prints one JSON object.

To measure another checkout (a base commit) with this bench, run it from that checkout's folder with
``PYTHONPATH`` set to it: ``fm`` runs as ``python -m``, which puts the working directory first on the path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import (
    FM,
    HELD_OUT,
    PYTHON,
    REPO,
    child_cpu,
    fm_env,
    land,
    load_docs,
    optional_parts,
    read_corpus,
    run_pipeline,
    stage_split,
    timeline,
    train_tokenizer,
    write_corpus,
)

TARGET_FIXED_S = 3.0


def measured_run(root: Path, env: dict[str, str], batches: list[str], profile: Path | None) -> dict:
    """One ``fm run <batches>``: wall, CPU, the batches' stage split and (one batch) the run's timeline."""
    command = [PYTHON, "-m", "cProfile", "-o", str(profile), *FM[1:]] if profile else FM
    cpu_before = child_cpu()
    started_at = time.time()
    started = time.perf_counter()
    proc = subprocess.run([*command, "run", *batches], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    ended_at = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"fm run failed:\n{proc.stderr[-3000:]}")
    split = stage_split(root, only=tuple(batches))
    stage_wall = sum(row["wall_s"] for row in split.values())
    line = timeline(env, started_at, ended_at, stage_wall) if len(batches) == 1 else None
    unit_s = sum(row["unit_s"] for row in split.values())
    driver_s = sum(row["driver_s"] for row in split.values())
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(child_cpu() - cpu_before, 3),
        "stage_wall_s": round(stage_wall, 3),
        "unit_s": round(unit_s, 3),
        "driver_s": round(driver_s, 3),
        "outside_stages_s": round(max(0.0, wall - stage_wall), 3),
        "fixed_s": round(max(0.0, wall - unit_s), 3),
        "timeline": line,
        # without the release run: what each batch pays when releases are coalesced (the daemon's
        # release_after_preprocess sensor, a backfill's one `fm run`)
        "batch_path_fixed_s": round(line["until_preprocess_end_s"] - unit_s, 3) if line else None,
        "per_stage": {
            stage: {key: row[key] for key in ("wall_s", "driver_s", "unit_s", "units")}
            for stage, row in split.items()
            if row["units"]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "results" / "fixed_costs")
    parser.add_argument("--docs", type=int, default=100, help="documents per measured batch")
    parser.add_argument("--warm-docs", type=int, default=300, help="documents of the warm-up batch")
    parser.add_argument("--reps", type=int, default=3, help="measured batches (one fm run each)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--backfill-batches",
        type=int,
        default=4,
        help="then land this many batches and run them in one fm run (one release): fixed seconds per batch",
    )
    parser.add_argument("--profile", action="store_true", help="run the measured runs under cProfile")
    parser.add_argument(
        "--warm-corpus",
        type=Path,
        help="the warm-up batch is this JSONL(.gz/.xz) file's documents (a root that already holds a large "
        "batch: what the release and views pay as the root grows), not --warm-docs of --packages",
    )
    parser.add_argument(
        "--packages", default=",".join(HELD_OUT), help="Debian documentation packages to read"
    )
    args = parser.parse_args()
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    docs = load_docs(workdir, None, tuple(p for p in args.packages.split(",") if p))
    needed = args.warm_docs + args.docs * (args.reps + args.backfill_batches)
    if len(docs) < needed:
        raise SystemExit(
            f"fixed_costs: {len(docs)} documents, {needed} needed (--warm-docs + --docs x --reps)"
        )
    tokenizer = train_tokenizer(workdir, docs)
    root = workdir / "root"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    env = fm_env(root, tokenizer, args.workers)

    warm_docs = read_corpus(args.warm_corpus) if args.warm_corpus else docs[: args.warm_docs]
    warm_mb = write_corpus(workdir / "corpora" / "warm.jsonl", warm_docs)
    land(root, workdir / "corpora" / "warm.jsonl", "warm", env)
    warm = run_pipeline(root, env)
    runs = []
    for rep in range(args.reps):
        start = args.warm_docs + rep * args.docs
        corpus = workdir / "corpora" / f"batch-{rep}.jsonl"
        write_corpus(corpus, docs[start : start + args.docs])
        batch = land(root, corpus, f"batch-{rep}", env)
        profile = workdir / f"fixed_costs-{rep}.prof" if args.profile else None
        runs.append(measured_run(root, env, [batch], profile))
    fixed = [run["fixed_s"] for run in runs]
    backfill = None
    if args.backfill_batches:
        batches = []
        for index in range(args.backfill_batches):
            start = args.warm_docs + (args.reps + index) * args.docs
            corpus = workdir / "corpora" / f"backfill-{index}.jsonl"
            write_corpus(corpus, docs[start : start + args.docs])
            batches.append(land(root, corpus, f"backfill-{index}", env))
        backfill = measured_run(root, env, batches, None)
        backfill["fixed_s_per_batch"] = round(backfill["fixed_s"] / len(batches), 3)
        backfill["batches"] = len(batches)
    result = {
        "load": os.getloadavg(),
        "notes": optional_parts()[1]
        + (["profiled: timings include cProfile's overhead"] if args.profile else []),
        "workers": args.workers,
        "docs_per_batch": args.docs,
        "warm_batch": {
            "docs": len(warm_docs),
            "mb": round(warm_mb, 1),
            "run_wall_s": round(warm["wall_s"], 2),
        },
        "runs": runs,
        "fixed_s": {"min": min(fixed), "median": round(statistics.median(fixed), 3), "max": max(fixed)},
        "outside_stages_s_median": round(statistics.median(run["outside_stages_s"] for run in runs), 3),
        "batch_path_fixed_s_median": round(statistics.median(run["batch_path_fixed_s"] for run in runs), 3),
        "backfill": backfill,
        "target": f"fixed_s <= {TARGET_FIXED_S}",
        "met": statistics.median(fixed) <= TARGET_FIXED_S,
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
