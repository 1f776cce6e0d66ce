"""Spark cluster benchmark: the text chain of one batch with its units in-process (``FM_WORKERS=1``) and as
Spark tasks (``FM_UNIT_EXECUTOR=spark``) on a standalone master + N workers on loopback, on the same
documents in the same run. Prints one JSON object.

    python bench/spark_cluster.py [--workdir DIR] [--docs-per-package N] [--packages a,b] [--workers 2]
                                  [--units 6]

Both runs are a fresh ``fm run`` process on a fresh root holding the same landed batch (same batch id, so
the same rows) cut into ``--units`` land parts (``FM_LAND_ROWS_PER_PART``, the same in both: it is in the
keys), so the record stages have that many units; the tokenizer is pinned from a file trained once up
front. Per stage it reports wall,
units wall (the time the units ran: Spark job submission, task scheduling, the executors' Python workers)
and where the units ran, read from each output's ``_SUCCESS.json``; ``cluster_over_local`` is the cluster's
wall over the in-process wall (within this run). The first stage with units on Spark (land) also pays for
starting the session: the driver's JVM and one executor per worker. ``identical_shard_bytes`` and ``identical_data_versions``
compare the two roots. The cluster (tests/loopback_spark.py: one core and ``--executor-memory`` per
executor) shares this host's cores with the driver, so on a small host it is slower than in-process: what
it shows is that the same code runs distributed with the same bytes, and what a Spark task costs per unit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from loopback_spark import EXECUTOR_CONF, loopback_cluster  # noqa: E402
from scale import (  # noqa: E402
    HELD_OUT,
    fm_env,
    load_docs,
    run_pipeline,
    shard_digests,
    train_tokenizer,
    write_corpus,
)

BATCH = "b-spark-bench"


def data_versions(root: Path) -> dict[str, str]:
    from fm_assets.engine.refs import read_success
    from fm_assets.engine.store import ObjectStore
    from fm_assets.stages.registry import CHAIN_NAMES

    store = ObjectStore(str(root))
    return {stage: read_success(store, stage, BATCH).data_version for stage in CHAIN_NAMES["text"]}


def chain_case(root: Path, corpus: Path, env: dict[str, str]) -> dict:
    """Land ``corpus`` as ``BATCH`` into a fresh ``root`` and run the chain in one ``fm run``."""
    import shutil

    from fm_assets.engine.landing import land_batch
    from fm_assets.engine.store import ObjectStore

    shutil.rmtree(root, ignore_errors=True)
    land_batch(ObjectStore(str(root)), corpus, source="held-out", license_id="CC-BY-SA-3.0",
               namespace="cloud", batch_id=BATCH)  # fmt: skip
    result = run_pipeline(root, env)
    result.pop("stages")
    return result


def per_stage(local: dict, cluster: dict) -> dict[str, dict]:
    rows = {}
    for stage, here in local["split"].items():
        there = cluster["split"][stage]
        rows[stage] = {
            "units": there["units"],
            "local_wall_s": here["wall_s"],
            "cluster_wall_s": there["wall_s"],
            "cluster_over_local": round(there["wall_s"] / here["wall_s"], 2) if here["wall_s"] else None,
            "local_units_wall_s": here["units_wall_s"],
            "cluster_units_wall_s": there["units_wall_s"],
            "local_where": here["where"],
            "cluster_where": there["where"],
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "results" / "spark_cluster")
    parser.add_argument("--docs-per-package", type=int, default=100)
    parser.add_argument("--packages", default=",".join(HELD_OUT[:3]), help="Debian documentation packages")
    parser.add_argument("--workers", type=int, default=2, help="standalone workers (1 core each)")
    parser.add_argument("--executor-memory", default=EXECUTOR_CONF["spark.executor.memory"])
    parser.add_argument("--units", type=int, default=6, help="land parts, so units of each record stage")
    args = parser.parse_args()
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    docs = load_docs(workdir, args.docs_per_package, tuple(p for p in args.packages.split(",") if p))
    tokenizer = train_tokenizer(workdir, docs)
    corpus = workdir / "corpora" / "batch.jsonl"
    mb = write_corpus(corpus, docs)

    parts = {"FM_LAND_ROWS_PER_PART": str(max(1, -(-len(docs) // args.units)))}

    local_env = {**fm_env(workdir / "roots" / "in-process", tokenizer, 1), **parts}
    local = chain_case(workdir / "roots" / "in-process", corpus, local_env)
    conf = {**EXECUTOR_CONF, "spark.executor.memory": args.executor_memory}
    with loopback_cluster(workers=args.workers, state=workdir / "cluster") as master:
        env = {**fm_env(workdir / "roots" / "cluster", tokenizer, 1), **parts, "FM_UNIT_EXECUTOR": "spark",
               "FM_SPARK_MASTER": master, "FM_SPARK_CONF": json.dumps(conf)}  # fmt: skip
        cluster = chain_case(workdir / "roots" / "cluster", corpus, env)
    shards = {name: shard_digests(workdir / "roots" / name) for name in ("in-process", "cluster")}
    result = {
        "load": os.getloadavg(),
        "cpus": os.cpu_count(),
        "docs": len(docs),
        "corpus_mb": round(mb, 3),
        "cluster": {"workers": args.workers, "cores_per_worker": 1, "executor_conf": conf},
        "land_rows_per_part": int(parts["FM_LAND_ROWS_PER_PART"]),
        "wall_s": {"in_process": round(local["wall_s"], 2), "cluster": round(cluster["wall_s"], 2)},
        "cluster_over_local": round(cluster["wall_s"] / local["wall_s"], 2),
        "stages": per_stage(local, cluster),
        "shards": len(shards["in-process"]),
        "identical_shard_bytes": bool(shards["in-process"]) and shards["in-process"] == shards["cluster"],
        "identical_data_versions": data_versions(workdir / "roots" / "in-process")
        == data_versions(workdir / "roots" / "cluster"),
        "note": "the executors share this host's cores with the driver, the master and the workers; a ratio "
        "above 1 is Spark's per-job and per-task cost, not a cluster's speed",
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
