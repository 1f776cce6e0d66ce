"""Which document survives in each component, and which documents of this batch are removed.

The survivor rule: a document already in the prior index wins (it was published earlier), then the
highest ``quality_score`` (null ranks lowest), then the smallest ``doc_id``. ``cluster_id`` is the
smallest ``doc_id`` in the component. Every other document of this batch in the component is removed
when its similarity to the survivor is at least ``min_survivor_similarity``; farther chain members are
kept. Removed documents are reported in :data:`REMOVED_SCHEMA`.

:func:`judge_losers` is the Spark form; :func:`survivors_in_process` applies the same rule (the same
sort key, :func:`_survivor_key` in numpy) for the in-process path. Both feed :func:`removed_table`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

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


def _survivor_key() -> Column:
    """Sort key of the survivor rule; the smallest key in a component wins.

    Prior documents first, then the highest quality (NaN above every number, null last, as Spark's
    descending order puts them), then the smallest doc id.
    """
    quality = F.col("quality_score")
    return F.struct(
        F.when(F.col("prior"), 0).otherwise(1).alias("prior_rank"),
        F.when(quality.isNull(), 2).when(F.isnan(quality), 0).otherwise(1).alias("quality_class"),
        F.when(F.isnan(quality), F.lit(0.0)).otherwise(-quality).alias("negative_quality"),
        F.col("node"),
    )


def survivors_in_process(
    component: np.ndarray, node: np.ndarray, prior: np.ndarray, quality: pa.Array | pa.ChunkedArray
) -> np.ndarray:
    """The survivor (a node number) of each member's component: the smallest :func:`_survivor_key`.

    ``node`` numbers members in ``doc_id`` order, ``quality`` is their float32 ``quality_score``. The key
    is the same (prior first; quality NaN, then numbers descending, then null; smallest node), and
    numpy's ordering agrees with Spark's on it: -0.0 ties 0.0 and NaN never reaches the comparison.
    """
    quality = pc.cast(quality, pa.float64())
    values = np.asarray(quality.fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
    is_null = np.asarray(quality.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    is_nan = np.isnan(values) & ~is_null
    quality_class = np.where(is_null, 2, np.where(is_nan, 0, 1))
    negative_quality = np.where(is_null | is_nan, 0.0, -values)
    prior_rank = np.where(prior, 0, 1)
    order = np.lexsort((node, negative_quality, quality_class, prior_rank, component))
    first = np.ones(len(order), dtype=bool)
    first[1:] = component[order][1:] != component[order][:-1]
    best = order[first]  # one member per component, components ascending
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, len(order)))
    survivor = np.empty(len(order), dtype=np.int64)
    survivor[order] = np.repeat(node[best], sizes)
    return survivor


def judge_losers(components: DataFrame, nodes: DataFrame, config: NearDedupConfig) -> DataFrame:
    """doc_id, cluster_id, survivor_id, survivor_is_prior, similarity for every non-survivor of this batch."""
    members = components.join(nodes.select(F.col("doc_id").alias("node"), "quality_score", "prior"), "node")
    survivors = (
        members.groupBy("component")
        .agg(F.min(_survivor_key()).alias("best"))
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
