"""The in-process near-dup path (near_dup.local) against the Spark path: byte-identical removed tables and
band index files, for one batch and for a batch deduplicated against an earlier batch's index written by
either path; the engine choice; and a small batch that never starts a JVM."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_planted import base_documents, make_variant, planted_corpus

from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.job import NearDedupOutcome, choose_engine, run_near_dedup

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
THRESHOLD = 0.8
# stats that describe how the work ran rather than what it found
ENGINE_STATS = {"engine", "seconds", "phase_seconds", "cc_iterations"}


def _never_called():
    raise AssertionError("the in-process path asked for a SparkSession")


def _signature_rows(docs: list[str], config: NearDedupConfig) -> pa.Table:
    """The batch's signature rows without text but with each row's file and row, as the stage hands them
    over (signature_units.placed)."""
    from fm_assets.transforms.dedup.near_dup.docs import read_docs_arrow
    from fm_assets.transforms.dedup.near_dup.signature_arrow import SIG_ARROW_SCHEMA, signature_batches
    from fm_assets.transforms.dedup.near_dup.signature_units import PLACED_SCHEMA

    compute = signature_batches(config, *config.lsh())
    tables = []
    for index, path in enumerate(docs):
        table = pa.Table.from_batches(
            list(compute(iter(read_docs_arrow([path]).to_batches(max_chunksize=2000)))), SIG_ARROW_SCHEMA
        )
        table = table.drop_columns("text")
        table = table.append_column("part", pa.array([index] * table.num_rows, pa.int32()))
        tables.append(table.append_column("row", pa.array(range(table.num_rows), pa.int64())))
    return pa.concat_tables(tables).cast(PLACED_SCHEMA) if tables else PLACED_SCHEMA.empty_table()


def _run(engine: str, spark, docs: list[str], priors: list[str], out: Path, config: NearDedupConfig):
    """run_near_dedup forced onto one engine (local_max_docs is not part of the output). "local-units": the
    in-process path as the stage runs it, handed signature rows without text (its scorer reads the texts
    it needs from the files)."""
    forced = dataclasses.replace(config, local_max_docs=0 if engine == "spark" else 10**9)
    units = (lambda: _signature_rows(docs, forced)) if engine == "local-units" else None
    outcome = run_near_dedup(
        spark if engine == "spark" else _never_called, docs, priors, str(out), forced, signatures=units
    )
    assert outcome.stats["engine"] == engine.removesuffix("-units")
    return outcome


def _files(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return sink.getvalue().to_pybytes()


def _assert_same(
    local: NearDedupOutcome, spark: NearDedupOutcome, local_index: Path, spark_index: Path
) -> None:
    assert local.removed.schema.equals(spark.removed.schema, check_metadata=True)
    assert _ipc(local.removed) == _ipc(spark.removed)  # rows, order, cluster/survivor ids, similarity bits
    assert local.index_rows == spark.index_rows
    local_files, spark_files = _files(local_index), _files(spark_index)
    assert sorted(local_files) == sorted(spark_files)
    for name in spark_files:
        assert local_files[name] == spark_files[name], name
    assert local.stats.keys() == spark.stats.keys()
    assert {k: v for k, v in local.stats.items() if k not in ENGINE_STATS} == {
        k: v for k, v in spark.stats.items() if k not in ENGINE_STATS
    }


def _write(path: Path, ids: list[str], texts: list[str | None], quality: list[float | None]) -> str:
    table = pa.table(
        {
            "doc_id": pa.array(ids, pa.string()),
            "text": pa.array(texts, pa.large_string()),
            "quality_score": pa.array(quality, pa.float32()),
        }
    )
    pq.write_table(table, path)
    return str(path)


def _check_two_batches(
    spark, tmp: Path, first: list[str], second: list[str], config: NearDedupConfig
) -> dict:
    """Batch 1 on both engines, then batch 2 on both engines against each engine's batch-1 index."""
    engines = ("spark", "local", "local-units")
    one = {e: _run(e, spark, first, [], tmp / f"idx1-{e}", config) for e in engines}
    _assert_same(one["local"], one["spark"], tmp / "idx1-local", tmp / "idx1-spark")
    _assert_same(one["local-units"], one["spark"], tmp / "idx1-local-units", tmp / "idx1-spark")
    two = {
        (reader, writer): _run(
            reader, spark, second, [str(tmp / f"idx1-{writer}")], tmp / f"idx2-{reader}-{writer}", config
        )
        for writer in ("spark", "local")
        for reader in engines
    }
    for (reader, writer), outcome in two.items():
        _assert_same(
            outcome, two[("spark", "spark")], tmp / f"idx2-{reader}-{writer}", tmp / "idx2-spark-spark"
        )
    return {"first": one["spark"], "second": two[("spark", "spark")]}


def test_planted_corpus_local_equals_spark(spark, tmp_path):
    corpus = planted_corpus(40)
    first_rows = [i for i, d in enumerate(corpus.doc_ids) if d.startswith("b") or d.endswith(("-3", "-5"))]
    second_rows = [i for i in range(len(corpus.doc_ids)) if i not in set(first_rows)]
    first = [corpus.write(str(tmp_path / "b1.parquet"), first_rows)]
    second = [corpus.write(str(tmp_path / "b2.parquet"), second_rows)]
    out = _check_two_batches(spark, tmp_path, first, second, NearDedupConfig(threshold=THRESHOLD))
    assert out["first"].removed.num_rows > 10
    assert out["second"].stats["removed_against_prior"] > 50


def _real_texts(sample: dict, count: int) -> list[str]:
    texts = []
    for path in sorted(Path(sample["dest"]).rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line)["text"]
            if 50 < len(text.split()) < 3000:
                texts.append(text)
    assert len(texts) >= count
    return texts[:count]


def test_real_text_local_equals_spark(spark, real_sample, tmp_path):
    """Real documents (several languages) plus near-copies of some of them, split over two batches in
    two files each; quality has ties, nulls, NaN and -0.0 so every branch of the survivor rule is used."""
    rng = random.Random(7)
    texts = _real_texts(real_sample, 120)
    vocabulary = sorted({w.lower() for t in texts[:20] for w in t.split()[:200]})
    ids, docs, quality = [], [], []
    for i, text in enumerate(texts):
        ids.append(f"r{i:04d}")
        docs.append(text)
        quality.append(rng.choice([0.5, 0.5, None, math.nan, -0.0, 0.0, round(rng.random(), 3)]))
        if i % 3 == 0:
            for k, target in enumerate((1.0, 0.95, 0.85, 0.7)[: 1 + i % 4]):
                ids.append(f"r{i:04d}-{k}")
                docs.append(make_variant(text, target, rng, vocabulary))
                quality.append(rng.choice([0.5, None, math.nan, 0.9, round(rng.random(), 3)]))
    order = list(range(len(ids)))
    rng.shuffle(order)
    half = len(order) // 2
    parts = [order[:half][::2], order[:half][1::2], order[half:][::2], order[half:][1::2]]
    paths = [
        _write(tmp_path / f"p{k}.parquet", [ids[i] for i in p], [docs[i] for i in p], [quality[i] for i in p])
        for k, p in enumerate(parts)
    ]
    out = _check_two_batches(spark, tmp_path, paths[:2], paths[2:], NearDedupConfig(threshold=THRESHOLD))
    assert out["first"].removed.num_rows > 5
    assert out["second"].stats["removed_against_prior"] > 5


def test_edge_inputs_and_other_settings_local_equals_spark(spark, tmp_path):
    """Empty and token-less documents, CJK, a huge document, buckets above max_bucket_pairs (star pairs),
    a batch listed among its own priors, estimate-only scoring and a survivor floor; no quality column."""
    text = base_documents(1)[0]
    rng = random.Random(3)
    vocabulary = sorted(set(text.lower().split()))
    ids = ["empty", "blank", "one", "one-again", "cjk-a", "cjk-b", "ws-a", "ws-b", "huge", "plain"]
    docs = [
        "",
        "  \n\t ",
        "word",
        "word",
        "東京は日本の首都であり大きな都市です。人口も多い。",
        "東京は日本の首都であり大きな都市です。人口も多い",
        text,
        "\n\n".join(text.split()),
        " ".join(base_documents(5)) * 200,
        "something else entirely different here and now",
    ]
    for k in range(12):  # one bucket of 13 members: more than max_bucket_pairs below
        ids.append(f"star-{k:02d}")
        docs.append(make_variant(text, 0.97 if k % 2 else 1.0, rng, vocabulary))
    path = tmp_path / "edge.parquet"
    pq.write_table(pa.table({"doc_id": ids, "text": pa.array(docs, pa.large_string())}), path)
    for name, config in {
        "default": NearDedupConfig(),
        "estimate": NearDedupConfig(verify_exact=False, max_bucket_pairs=4, min_survivor_similarity=0.99),
    }.items():
        runs = {
            e: _run(e, spark, [str(path)], [], tmp_path / f"{name}-{e}", config) for e in ("spark", "local")
        }
        _assert_same(runs["local"], runs["spark"], tmp_path / f"{name}-local", tmp_path / f"{name}-spark")
        assert runs["spark"].stats["empty_docs"] == 2 and runs["spark"].removed.num_rows >= 6
        if name == "estimate":  # variants below the survivor floor stay: chain members
            assert runs["spark"].stats["chain_kept"] > 0
    # a batch (wrongly) listed among its own priors dedups against nothing of itself, on both paths
    priors = [str(tmp_path / "default-spark")]
    again = {
        e: _run(e, spark, [str(path)], priors, tmp_path / f"self-{e}", NearDedupConfig())
        for e in ("spark", "local")
    }
    _assert_same(again["local"], again["spark"], tmp_path / "self-local", tmp_path / "self-spark")
    assert again["local"].stats["removed_against_prior"] == 0


def test_spark_xxhash64_matches_spark(spark):
    """The in-process index writer puts rows in the parts Spark's pmod(xxhash64(key), n) picks."""
    from pyspark.sql import functions as F

    from fm_assets.transforms.dedup.near_dup.index import spark_xxhash64

    strings = ["", "a", "doc-1", "東京", "é" * 40, "x" * 1000, "\u0000z", "🙂 emoji"]
    longs = [0, 1, -1, 2**63 - 1, -(2**63), 123456789012345, -42]
    rows = (
        spark.createDataFrame([(s,) for s in strings], "s string")
        .select(F.xxhash64("s").alias("h"))
        .collect()
    )
    assert spark_xxhash64(pa.array(strings)).tolist() == [r["h"] for r in rows]
    rows = spark.createDataFrame([(v,) for v in longs], "v long").select(F.xxhash64("v").alias("h")).collect()
    assert spark_xxhash64(pa.array(longs, pa.int64())).tolist() == [r["h"] for r in rows]


def test_unsupported_input_falls_back_to_spark(spark, tmp_path):
    """Duplicate doc ids are outside what the in-process path reproduces: the Spark path runs instead."""
    path = _write(tmp_path / "dup.parquet", ["a", "a", "b"], ["same words in here"] * 3, [0.1, 0.2, 0.3])
    calls = []

    def session():
        calls.append(1)
        return spark

    out = run_near_dedup(session, [path], [], str(tmp_path / "idx"), NearDedupConfig())
    assert calls == [1] and out.stats["engine"] == "spark"


def test_engine_choice_and_fingerprint(tmp_path):
    corpus = planted_corpus(3)
    docs = corpus.write(str(tmp_path / "docs.parquet"))
    n = len(corpus.doc_ids)
    out = run_near_dedup(
        _never_called, [docs], [], str(tmp_path / "idx"), NearDedupConfig(local_max_docs=2 * n)
    )
    assert out.stats["engine"] == "local" and out.index_rows > 0
    prior = [str(tmp_path / "idx")]
    assert choose_engine(n, prior, NearDedupConfig(local_max_docs=n + out.index_rows + 1)) == "local"
    assert choose_engine(n, prior, NearDedupConfig(local_max_docs=n + out.index_rows)) == "spark"
    assert choose_engine(n, [], NearDedupConfig(local_max_docs=0)) == "spark"
    # the engine choice is not output: the fingerprint (stage key, index _SUCCESS.json) ignores it and
    # keeps the value it had before the field existed
    assert (
        NearDedupConfig().fingerprint()
        == NearDedupConfig(local_max_docs=0).fingerprint()
        == "a51cb2d1ff85256e"
    )
    assert NearDedupConfig(threshold=0.85).fingerprint() == "2f466dcbc370df12"


_NO_JVM_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from spark_planted import planted_corpus
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    from fm_assets.transforms.dedup.near_dup.job import NearDedupConfig, run_near_dedup

    calls = []
    def session():
        calls.append(1)
        raise AssertionError("SparkSession requested")

    tmp = sys.argv[2]
    corpus = planted_corpus(14, seed=5)
    n = len(corpus.doc_ids)
    prior = corpus.write(tmp + "/prior.parquet", list(range(0, n, 2)))
    batch = corpus.write(tmp + "/batch.parquet", list(range(1, n, 2)))
    run_near_dedup(session, [prior], [], tmp + "/idx-prior", NearDedupConfig())  # warm: imports, LSH params
    walls = []
    for k in range(3):
        t = time.perf_counter()
        out = run_near_dedup(session, [batch], [tmp + "/idx-prior"], tmp + f"/idx-{k}", NearDedupConfig())
        walls.append(time.perf_counter() - t)
    print(json.dumps({
        "docs": out.stats["docs"], "prior_docs": n - out.stats["docs"], "engine": out.stats["engine"],
        "wall_s": sorted(walls)[1], "calls": len(calls),
        "active_session": SparkSession.getActiveSession() is not None,
        "spark_context": SparkContext._active_spark_context is not None,
        "jvm": SparkContext._jvm is not None,
    }))
    """
)


def test_small_batch_never_starts_spark(tmp_path, record_property):
    """A ~50-doc batch against a ~50-doc prior index, in a fresh interpreter: no SparkSession, no JVM.
    The wall time is recorded (not asserted)."""
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", _NO_JVM_SCRIPT, str(REPO / "tests"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    record_property("small_batch_local_wall_s", result["wall_s"])
    print(f"small batch in-process: {result}")
    assert result["engine"] == "local" and result["calls"] == 0
    assert not (result["active_session"] or result["spark_context"] or result["jvm"])
