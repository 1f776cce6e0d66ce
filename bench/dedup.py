"""Benchmark the near-dup engine; prints one JSON object.

- signature throughput per core: ``MinHasher`` vs datasketch ``MinHash.update`` on the same real documents;
- small batch, in-process vs Spark (``small_batch``): median wall of a ~100-document batch deduplicated
  against a ~100-document prior index on each engine, interleaved in the same run, outputs checked identical;
- fixed cost: median seconds of a small ``run_near_dedup`` call on Spark (60 and 600 documents, with a prior index);
- whole-stage time (``run_near_dedup`` on Spark in ``local[*]``) at three corpus sizes large enough that the fixed
  cost no longer dominates (default about 20K, 40K, 80K documents), seconds per 1K docs and the growth ratio;
  each size also runs in-process (``local_seconds``, same output) to place ``local_max_docs``;
- peak memory: driver Python RSS, JVM RSS (driver + executor in local mode), Python worker RSS;
- duplicates found vs datasketch ``MinHashLSH`` (greedy keep-first) on the same corpus, both scored
  against exact Jaccard ground truth of the planted pairs.

Usage: python bench/dedup.py [--bases 2800 5600 11200] [--datasketch-docs 300] [--small-repeats 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from datasketch import MinHash, MinHashLSH  # noqa: E402
from spark_planted import base_documents, planted_corpus, shingle_set  # noqa: E402

from fm_assets.defs.resources.spark import get_or_create_session  # noqa: E402
from fm_assets.transforms.dedup.minhash import MinHasher  # noqa: E402
from fm_assets.transforms.dedup.near_dup.job import NearDedupConfig, run_near_dedup  # noqa: E402

THRESHOLD = 0.8
SPARK = NearDedupConfig(local_max_docs=0)  # always the Spark path
LOCAL = NearDedupConfig(local_max_docs=2**62)  # always in-process


def _engine(config: NearDedupConfig, engine: str) -> NearDedupConfig:
    return dataclasses.replace(config, local_max_docs=(SPARK if engine == "spark" else LOCAL).local_max_docs)


def _index_digest(folder: str) -> str:
    h = hashlib.sha256()
    for f in sorted(Path(folder).rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(folder)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _datasketch_signature(text: str) -> MinHash:
    m = MinHash(num_perm=128, seed=1)
    for shingle in shingle_set(text):
        m.update(" ".join(shingle).encode())
    return m


def signature_speed(n_docs: int, datasketch_docs: int) -> dict:
    docs = base_documents(n_docs, seed=11)
    hasher = MinHasher()
    timings = []
    for _ in range(3):  # steady state: the first pass also pays page faults and lazy imports
        t = time.perf_counter()
        hasher.signatures(docs)
        timings.append(time.perf_counter() - t)
    ours = n_docs / min(timings)
    sample = docs[:datasketch_docs]
    t = time.perf_counter()
    for doc in sample:
        _datasketch_signature(doc)
    theirs = len(sample) / (time.perf_counter() - t)
    words = sum(len(d.split()) for d in docs) / n_docs
    return {
        "docs": n_docs,
        "mean_words_per_doc": round(words, 1),
        "ours_docs_per_s_per_core": round(ours, 1),
        "datasketch_docs_per_s_per_core": round(theirs, 1),
        "speedup": round(ours / theirs, 1),
    }


class PeakMemory:
    """Samples RSS of this process, its JVM child and the JVM's Python workers every 100 ms."""

    def __init__(self) -> None:
        self.peak = {"jvm_mb": 0.0, "python_workers_mb": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            jvm = workers = 0
            for child in me.children(recursive=True):
                try:
                    name = " ".join(child.cmdline()[:1])
                    rss = child.memory_info().rss
                except psutil.Error:
                    continue
                if "java" in name:
                    jvm += rss
                else:
                    workers += rss
            self.peak["jvm_mb"] = max(self.peak["jvm_mb"], jvm / 2**20)
            self.peak["python_workers_mb"] = max(self.peak["python_workers_mb"], workers / 2**20)
            time.sleep(0.1)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def recall_of(corpus, clusters: dict[str, str]) -> float:
    positives = [(i, j) for i, j, s in corpus.family_pairs() if s >= THRESHOLD + 0.05]
    ids = corpus.doc_ids
    hit = sum(
        1
        for i, j in positives
        if clusters.get(ids[i]) is not None and clusters.get(ids[i]) == clusters.get(ids[j])
    )
    return hit / max(1, len(positives))


def datasketch_lsh(corpus) -> dict:
    t = time.perf_counter()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=128)
    clusters: dict[str, str] = {}
    removed = 0
    for doc_id, text in zip(corpus.doc_ids, corpus.texts, strict=True):
        sig = _datasketch_signature(text)
        hits = sorted(lsh.query(sig))
        if hits:  # greedy keep-first: a doc matching a kept doc is removed
            removed += 1
            clusters[doc_id] = clusters.setdefault(hits[0], hits[0])
        else:
            lsh.insert(doc_id, sig)
    return {
        "removed": removed,
        "recall_at_t+0.05": round(recall_of(corpus, clusters), 4),
        "seconds": round(time.perf_counter() - t, 2),
    }


def small_batch(spark, tmp: str, repeats: int) -> dict:
    """~100 documents against a ~100-document prior index: median wall per engine, interleaved rounds.

    The in-process path has paid its one-off costs (imports, LSH parameters) in a warm-up call, as the
    Spark path has paid its JVM start; both outputs (removed table, index files) must be identical.
    """
    corpus = planted_corpus(28, seed=2028)
    n = len(corpus.doc_ids)
    prior = corpus.write(f"{tmp}/small-prior.parquet", list(range(0, n, 2)))
    batch = corpus.write(f"{tmp}/small-batch.parquet", list(range(1, n, 2)))
    prior_index = f"{tmp}/small-prior-idx"
    run_near_dedup(spark, [prior], [], prior_index, SPARK)
    walls: dict[str, list[float]] = {"local": [], "spark": []}
    cpu_local: list[float] = []
    outputs = {}
    for k in range(repeats + 1):  # round 0 warms both engines up and is not counted
        for engine in ("local", "spark"):
            out_dir = f"{tmp}/small-{engine}-{k}"
            t, c = time.perf_counter(), time.process_time()
            out = run_near_dedup(spark, [batch], [prior_index], out_dir, _engine(SPARK, engine))
            wall, cpu = time.perf_counter() - t, time.process_time() - c
            assert out.stats["engine"] == engine
            outputs[engine] = (out.removed, _index_digest(out_dir))
            if k:
                walls[engine].append(wall)
                if engine == "local":
                    cpu_local.append(cpu)
    assert outputs["local"][0].equals(outputs["spark"][0]) and outputs["local"][1] == outputs["spark"][1]
    median = {e: sorted(v)[len(v) // 2] for e, v in walls.items()}
    return {
        "docs": out.stats["docs"],
        "prior_index_docs": n - out.stats["docs"],
        "repeats": repeats,
        "local_wall_s": round(median["local"], 4),
        "local_cpu_s": round(sorted(cpu_local)[len(cpu_local) // 2], 4),
        "spark_wall_s": round(median["spark"], 3),
        "speedup": round(median["spark"] / median["local"], 1),
        "identical_output": True,
    }


def fixed_cost(spark, tmp: str, repeats: int = 3) -> dict:
    """Median seconds of small Spark calls (each against the index of an earlier small batch)."""
    out = {}
    for bases in (8, 84):  # about 60 and 600 documents
        corpus = planted_corpus(bases, seed=1000 + bases)
        n = len(corpus.doc_ids)
        prior = corpus.write(f"{tmp}/fixed-prior-{bases}.parquet", list(range(0, n, 2)))
        batch = corpus.write(f"{tmp}/fixed-batch-{bases}.parquet", list(range(1, n, 2)))
        run_near_dedup(spark, [prior], [], f"{tmp}/fixed-idx-{bases}", SPARK)
        seconds = []
        for k in range(repeats):
            both = [prior, batch]
            t = time.perf_counter()
            run_near_dedup(spark, both, [], f"{tmp}/fixed-a-{bases}-{k}", SPARK)
            run_near_dedup(spark, [batch], [f"{tmp}/fixed-idx-{bases}"], f"{tmp}/fixed-b-{bases}-{k}", SPARK)
            seconds.append((time.perf_counter() - t) / 2)
        out[f"{n}_docs_seconds_per_call"] = round(sorted(seconds)[len(seconds) // 2], 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bases", type=int, nargs=3, default=[2800, 5600, 11200])  # ~7.1 docs per base
    parser.add_argument("--datasketch-docs", type=int, default=300)
    parser.add_argument("--small-repeats", type=int, default=5)
    args = parser.parse_args()

    result: dict = {"signature": signature_speed(3000, args.datasketch_docs)}
    spark = get_or_create_session()
    result["spark_master"] = spark.sparkContext.master
    stages = []
    with tempfile.TemporaryDirectory() as tmp, PeakMemory() as peak:
        warm = planted_corpus(10, seed=99)
        run_near_dedup(spark, [warm.write(f"{tmp}/warm.parquet")], [], f"{tmp}/warm-idx", SPARK)
        result["small_batch"] = small_batch(spark, tmp, args.small_repeats)
        result["fixed_cost"] = fixed_cost(spark, tmp)
        for bases in args.bases:
            corpus = planted_corpus(bases, seed=bases)
            path = corpus.write(f"{tmp}/docs-{bases}.parquet")
            config = dataclasses.replace(SPARK, threshold=THRESHOLD)
            out = run_near_dedup(spark, [path], [], f"{tmp}/idx-{bases}", config)
            t = time.perf_counter()
            local = run_near_dedup(spark, [path], [], f"{tmp}/idx-local-{bases}", _engine(config, "local"))
            local_seconds = time.perf_counter() - t
            assert local.removed.equals(out.removed)
            assert _index_digest(f"{tmp}/idx-local-{bases}") == _index_digest(f"{tmp}/idx-{bases}")
            clusters = {r["doc_id"]: r["cluster_id"] for r in out.removed.to_pylist()}
            for r in out.removed.to_pylist():
                clusters.setdefault(r["survivor_id"], r["cluster_id"])
            stage = {
                "docs": len(corpus.doc_ids),
                "seconds": out.stats["seconds"],
                "docs_per_s": round(len(corpus.doc_ids) / out.stats["seconds"], 1),
                "seconds_per_1k_docs": round(1000 * out.stats["seconds"] / len(corpus.doc_ids), 3),
                "removed": out.removed.num_rows,
                "recall_at_t+0.05": round(recall_of(corpus, clusters), 4),
                "candidate_pairs": out.stats["candidate_pairs"],
                "phase_seconds": out.stats["phase_seconds"],
                "local_seconds": round(local_seconds, 3),
                "local_phase_seconds": local.stats["phase_seconds"],
                "local_over_spark": round(local_seconds / out.stats["seconds"], 2),
            }
            if bases == args.bases[0]:
                stage["datasketch_minhashlsh"] = datasketch_lsh(corpus)
            stages.append(stage)
    result["stage"] = stages
    first, last = stages[0], stages[-1]
    result["growth"] = {
        "docs_ratio": round(last["docs"] / first["docs"], 2),
        "time_ratio": round(last["seconds"] / first["seconds"], 2),
        "marginal_seconds_per_1k_docs": round(
            1000 * (last["seconds"] - stages[1]["seconds"]) / (last["docs"] - stages[1]["docs"]), 3
        ),
    }
    result["peak_memory_mb"] = {
        "driver_python": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "jvm_driver_and_executor": round(peak.peak["jvm_mb"], 1),
        "python_workers": round(peak.peak["python_workers_mb"], 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
