"""Which document survives in each component, and which documents of this batch are removed.

The survivor rule is :mod:`fm_assets.transforms.dedup.clusters`' (prior index first, then the highest
``quality_score``, then the smallest ``doc_id``). ``cluster_id`` is the smallest ``doc_id`` in the component. Every other document of this batch in the component is removed
when its similarity to the survivor is at least ``min_survivor_similarity``; farther chain members are
kept. Removed documents are reported in :data:`REMOVED_SCHEMA`.

:func:`judge_losers` is the Spark form; the in-process path (:mod:`.local`) calls
``clusters.survivors_in_process``. Both feed :func:`removed_table`.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fm_assets.transforms.dedup.clusters import survivor_key
from fm_assets.transforms.dedup.near_dup.candidates import similarities
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

REASON = "near_duplicate"

REMOVED_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string()),
        pa.field("cluster_id", pa.string()),
        pa.field("survivor_id", pa.string()),
        pa.field("similarity", pa.float64()),
        pa.field("survivor_is_prior", pa.bool_()),
        pa.field("reason", pa.string()),
    ]
)


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


def removed_table(judged: pa.Table | None, survivor_floor: float) -> pa.Table:
    """Judged non-survivors close enough to their survivor, in REMOVED_SCHEMA (sorted by doc_id)."""
    if judged is None or judged.num_rows == 0:
        return REMOVED_SCHEMA.empty_table()
    close = (
        judged.filter(pc.greater_equal(judged.column("similarity"), survivor_floor))
        .sort_by("doc_id")
        .sort_by("doc_id")
    )
    close = close.append_column("reason", pa.array([REASON] * close.num_rows, pa.string()))
    return close.select(REMOVED_SCHEMA.names).cast(REMOVED_SCHEMA)
