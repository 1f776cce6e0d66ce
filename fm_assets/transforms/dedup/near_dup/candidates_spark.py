"""Candidate pairs and their scores on Spark: the DataFrame half of :mod:`.candidates` (the rules are there).

:func:`prior_index` filters the prior band index to this batch's buckets, :func:`candidate_pairs` is
``candidates.bucket_pairs`` as one group-by, and :func:`similarities` maps ``candidates.similarity_batches``
(the scoring the in-process path shares) over the joined pairs.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from fm_assets.transforms.dedup.near_dup.candidates import SIM_SCHEMA, similarity_batches
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.index import BANDS_ARROW_SCHEMA, SIGS_ARROW_SCHEMA
from fm_assets.transforms.dedup.near_dup.spark_schema import spark_schema

_BROADCAST_MAX_DOCS = 200_000  # batches up to this size are broadcast against the prior index


def prior_index(
    spark: SparkSession, prior_index_paths: list[str], batch_bands: DataFrame, hashed: DataFrame, n_docs: int
) -> tuple[DataFrame, DataFrame]:
    """Prior band entries in this batch's buckets (prior=True) and prior nodes (text null).

    Entries of a document that is also in this batch are dropped: a batch (wrongly) listed among its
    own priors must not dedup against itself. Small batches are broadcast, so the growing prior index
    is filtered where it is read instead of being shuffled.
    """
    prior_bands = spark.read.schema(spark_schema(BANDS_ARROW_SCHEMA)).parquet(
        *[f"{p}/bands" for p in prior_index_paths]
    )
    prior_sigs = spark.read.schema(spark_schema(SIGS_ARROW_SCHEMA)).parquet(
        *[f"{p}/signatures" for p in prior_index_paths]
    )
    buckets = batch_bands.select("band", "band_hash")
    batch_ids = hashed.select("doc_id")
    if n_docs <= _BROADCAST_MAX_DOCS:
        buckets, batch_ids = F.broadcast(buckets), F.broadcast(batch_ids)
    bands = (
        prior_bands.join(buckets, ["band", "band_hash"], "left_semi")
        .join(batch_ids, "doc_id", "left_anti")
        .select("band", "band_hash", "doc_id", F.lit(True).alias("prior"))
    )
    nodes = prior_sigs.join(batch_ids, "doc_id", "left_anti").select(
        "doc_id",
        "quality_score",
        "signature",
        F.lit(None).cast("string").alias("text"),
        F.lit(True).alias("prior"),
    )
    return bands, nodes


def candidate_pairs(bands: DataFrame, max_bucket_pairs: int) -> DataFrame:
    """Distinct (a, b) with a < b sharing a band bucket; never two prior documents.

    One group-by builds each bucket's sorted member list; pairs are generated in the same projection
    (all pairs up to ``max_bucket_pairs`` members, else a star on the smallest id).
    """
    members = "sort_array(collect_list(struct(doc_id, prior)))"
    all_pairs = (
        "flatten(transform(sequence(0, size(m) - 2), i -> "
        "transform(sequence(i + 1, size(m) - 1), j -> struct(m[i] as x, m[j] as y))))"
    )
    star = "transform(slice(m, 2, size(m) - 1), y -> struct(m[0] as x, y as y))"
    pairs_expr = f"CASE WHEN size(m) <= {int(max_bucket_pairs)} THEN {all_pairs} ELSE {star} END"
    return (
        bands.groupBy("band", "band_hash")
        .agg(F.expr(members).alias("m"))
        .where(F.expr("size(m) > 1 AND exists(m, e -> NOT e.prior)"))
        .select(F.explode(F.expr(pairs_expr)).alias("p"))
        .where(~(F.col("p.x.prior") & F.col("p.y.prior")))
        .select(F.col("p.x.doc_id").alias("a"), F.col("p.y.doc_id").alias("b"))
        .distinct()
    )


def similarities(pairs: DataFrame, nodes: DataFrame, config: NearDedupConfig) -> DataFrame:
    """Attach each side's signature and text (null for prior documents) and score each pair.

    ``nodes`` has doc_id, signature, text; one join per side keeps the shuffles to two.
    """
    node = nodes.select("doc_id", "signature", "text")
    side_a = node.select(
        F.col("doc_id").alias("a"), F.col("signature").alias("sig_a"), F.col("text").alias("text_a")
    )
    side_b = node.select(
        F.col("doc_id").alias("b"), F.col("signature").alias("sig_b"), F.col("text").alias("text_b")
    )
    joined = pairs.join(side_a, "a").join(side_b, "b")
    columns = ["a", "b", "sig_a", "sig_b", "text_a", "text_b"]
    return joined.select(*columns).mapInArrow(similarity_batches(config), spark_schema(SIM_SCHEMA))
