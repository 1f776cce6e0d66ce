"""Near-duplicate removal with MinHash LSH, deduplicating each batch against every earlier one.

A small call (this batch's documents plus the prior indexes' documents below
``NearDedupConfig.local_max_docs``) runs in-process (:mod:`.local`: numpy/pyarrow, no JVM, the same
output byte for byte); anything larger runs on Spark. Importing this module, and a call that runs
in-process, imports no pyspark: :func:`run_spark_near_dedup` imports it and the Spark halves of the steps
(the ``*_spark`` modules) when it runs. It orchestrates the Spark path (all distributed; only the
removed-documents table comes back to the driver):

1. signatures per Arrow batch and band hashes per document (:mod:`.signatures_spark`);
2. candidate pairs from band buckets over this batch's bands plus the matching entries of the prior
   band index, scored by exact n-gram Jaccard or the MinHash estimate; edges need
   ``similarity >= threshold`` (:mod:`.candidates_spark`);
3. connected components over the edges (``clusters.connected_components``);
4. the survivor of each component (the ``clusters`` rule) and the removed documents of this batch
   (:mod:`.survivors_spark`, :mod:`.survivors`);
5. this batch's kept, non-empty documents written as its band index (:mod:`.index_spark`).

Documents without any token (empty, only punctuation) have no signature: they are kept and counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.docs import count_rows
from fm_assets.transforms.dedup.near_dup.index import indexed_documents
from fm_assets.transforms.dedup.near_dup.local import LocalUnsupported, run_local_near_dedup
from fm_assets.transforms.dedup.near_dup.outcome import Engine, NearDedupOutcome, Phases, outcome_stats
from fm_assets.transforms.dedup.near_dup.survivors import removed_table

if TYPE_CHECKING:  # pyspark is imported by run_spark_near_dedup, never by the in-process path
    from pyspark.sql import SparkSession

    SparkSource = SparkSession | Callable[[], SparkSession]

__all__ = ["NearDedupConfig", "NearDedupOutcome", "choose_engine", "run_near_dedup"]

logger = logging.getLogger(__name__)


def choose_engine(n_docs: int, prior_index_paths: list[str], config: NearDedupConfig) -> Engine:
    """Run "local" when this batch's documents plus the prior indexes' documents stay below
    ``config.local_max_docs`` (counted from parquet footers and the indexes' ``_SUCCESS.json``,
    stopping at the limit), else "spark"."""
    total = n_docs
    if total >= config.local_max_docs:
        return "spark"
    for path in prior_index_paths:
        total += indexed_documents(path)
        if total >= config.local_max_docs:
            return "spark"
    return "local"


def run_near_dedup(
    spark: SparkSource,
    docs_parquet: list[str],
    prior_index_paths: list[str],
    out_index_path: str,
    config: NearDedupConfig,
    signatures: Callable[[], pa.Table] | None = None,
    defer_index: bool = False,
) -> NearDedupOutcome:
    """Remove near-duplicates of this batch (against itself and the prior index); write its index.

    ``spark`` is a SparkSession or a zero-argument callable returning one; the callable is called only
    when the Spark path runs, so a small batch never starts a JVM. ``stats["engine"]`` says which ran.
    ``signatures``: the in-process path's signature rows computed elsewhere (``run_local_near_dedup``).
    ``defer_index``: the in-process path returns its index write (``NearDedupOutcome.write_index``) instead
    of writing it; the Spark path always writes it.
    """
    n_docs = count_rows(docs_parquet)
    if choose_engine(n_docs, prior_index_paths, config) == "local":
        try:
            return run_local_near_dedup(
                docs_parquet, prior_index_paths, out_index_path, config, n_docs, signatures, defer_index
            )
        except LocalUnsupported as exc:
            logger.info("near-dup: in-process path not applicable (%s); running on Spark", exc)
    session = spark() if callable(spark) else spark  # a session is not callable (Spark Connect's neither)
    return run_spark_near_dedup(session, docs_parquet, prior_index_paths, out_index_path, config, n_docs)


def run_spark_near_dedup(
    spark: SparkSession,
    docs_parquet: list[str],
    prior_index_paths: list[str],
    out_index_path: str,
    config: NearDedupConfig,
    n_docs: int | None = None,
) -> NearDedupOutcome:
    """:func:`run_near_dedup` on Spark, whatever the size.

    Spark actions per call: signatures (1), scored candidate pairs (1) and their counts (1); only when
    some pair passes the threshold: connected components (2 per round, usually 1-2 rounds) and the
    judged non-survivors (1); the index (2). Row counts come from parquet footers and the outputs.
    (Adaptive execution runs each shuffle of an action as its own job, so the UI shows ~35-40 jobs.)
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from fm_assets.transforms.dedup.clusters import connected_components
    from fm_assets.transforms.dedup.near_dup.candidates_spark import (
        candidate_pairs,
        prior_index,
        similarities,
    )
    from fm_assets.transforms.dedup.near_dup.index_spark import write_index
    from fm_assets.transforms.dedup.near_dup.signatures_spark import read_docs, signature_rows
    from fm_assets.transforms.dedup.near_dup.survivors_spark import judge_losers

    phases = Phases()
    lap = phases.lap
    bands, rows = config.lsh()
    docs = read_docs(spark, docs_parquet)
    n_docs = count_rows(docs_parquet) if n_docs is None else n_docs

    sigs = signature_rows(docs, config, bands, rows).localCheckpoint(eager=True)
    lap("signatures")
    hashed = sigs.where(F.col("n_shingles") > 0)

    batch_bands = hashed.select("doc_id", F.posexplode("bands").alias("band", "band_hash")).select(
        F.col("band").cast("int"), "band_hash", "doc_id", F.lit(False).alias("prior")
    )
    nodes = hashed.select("doc_id", "quality_score", "signature", "text", F.lit(False).alias("prior"))
    if prior_index_paths:
        prior_bands, prior_sigs = prior_index(spark, prior_index_paths, batch_bands, hashed, n_docs)
        batch_bands = batch_bands.unionByName(prior_bands)
        nodes = nodes.unionByName(prior_sigs)
    pairs = candidate_pairs(batch_bands, config.max_bucket_pairs)
    scored = similarities(pairs, nodes, config).localCheckpoint(eager=True)
    counts = scored.agg(
        F.count(F.lit(1)).alias("pairs"),
        F.count(F.when(F.col("similarity") >= config.threshold, 1)).alias("edges"),
    ).first()
    assert counts is not None  # a global aggregate has exactly one row
    n_candidates, n_edges = int(counts["pairs"]), int(counts["edges"])
    lap("candidates_verify")

    iterations = 0
    if n_edges:
        edges = scored.where(F.col("similarity") >= config.threshold)
        components = connected_components(edges, src="a", dst="b")
        iterations = components.iterations
        lap("components")
        # cached, not checkpointed: the collect below materialises it, the index's anti-join reuses it
        judged_df = judge_losers(components.assignments, nodes, config).persist(StorageLevel.MEMORY_AND_DISK)
        judged = judged_df.toArrow()  # sorted on the driver: a Spark sort costs a sampling job
        removed_ids = judged_df.where(F.col("similarity") >= config.survivor_floor()).select("doc_id")
    else:
        judged = None
        removed_ids = None
    removed = removed_table(judged, config.survivor_floor())
    lap("survivors")

    kept = hashed if removed_ids is None else hashed.join(removed_ids, "doc_id", "left_anti")
    index_rows = write_index(kept, Path(out_index_path), config)
    if n_edges:
        judged_df.unpersist()
    lap("index")

    stats = outcome_stats(
        engine="spark",
        config=config,
        n_docs=n_docs,
        index_rows=index_rows,
        removed=removed,
        judged=judged,
        candidate_pairs=n_candidates,
        verified_edges=n_edges,
        cc_iterations=iterations,
        prior_indexes=len(prior_index_paths),
        phases=phases,
    )
    logger.info("near-dup dedup: %s", stats)
    return NearDedupOutcome(removed=removed, index_rows=index_rows, stats=stats)
