"""Survivors and judged non-survivors on Spark: the DataFrame half of :mod:`.survivors` (the rule is there)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fm_assets.transforms.dedup.clusters import survivor_key
from fm_assets.transforms.dedup.near_dup.candidates_spark import similarities
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig


def judge_losers(components: DataFrame, nodes: DataFrame, config: NearDedupConfig) -> DataFrame:
    """doc_id, cluster_id, survivor_id, survivor_is_prior, similarity for every non-survivor of this batch."""
    members = components.join(nodes.select(F.col("doc_id").alias("node"), "quality_score", "prior"), "node")
    survivors = (
        members.groupBy("component")
        .agg(F.min(survivor_key()).alias("best"))
        .select(
            "component",
            F.col("best.node").alias("survivor_id"),
            (F.col("best.prior_rank") == 0).alias("survivor_is_prior"),
        )
    )
    losers = (
        members.where(~F.col("prior"))
        .join(survivors, "component")
        .where(F.col("node") != F.col("survivor_id"))
    )
    to_survivor = similarities(
        losers.select(F.col("node").alias("a"), F.col("survivor_id").alias("b")), nodes, config
    )
    return losers.select(
        F.col("node").alias("doc_id"),
        F.col("component").alias("cluster_id"),
        "survivor_id",
        "survivor_is_prior",
    ).join(to_survivor.select(F.col("a").alias("doc_id"), "similarity"), "doc_id")
