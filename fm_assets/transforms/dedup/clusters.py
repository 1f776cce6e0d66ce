"""Near-duplicate clusters and their survivors, written once per engine; every near-dup path calls these.

**Components.** Nodes are numbered so that "smallest number" is "smallest id"; a component is labelled with
its smallest node. On Spark, :func:`connected_components` (large-star / small-star; Kiveris et al.,
"Connected Components in MapReduce and Beyond", SoCC 2014): alternate *large-star* (every node links its
larger neighbours to the smallest node it sees) and *small-star* (every node links itself and its smaller
neighbours to the smallest of them); every step is a group-by and a join, no edge list reaches the driver.
The rounds end once the canonical edge set (child, parent) with parent < child is a *star forest* (no node
is both a child and a parent), checked with one aggregate over the round's locally checkpointed edges.
In-process, :func:`min_label_components` (numpy min-label propagation with pointer jumping) gives the same
labels.

**Survivors.** One rule for text and images: a member already in an earlier batch's index wins (it was
released earlier), then the highest quality (text: ``quality_score``, NaN above every number, null last, as
Spark's descending order puts them; images: pixel count), then the smallest node. :func:`survivor_key` is the
rule as a Spark sort key, :func:`survivors_in_process` the same key in numpy.

Users: text near-dup on Spark (``near_dup.job``, ``near_dup.survivors_spark.judge_losers``) and in-process
(``near_dup.local``), and image near-dup (``image_near_dup``, in-process after its Spark or local pair join).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:  # the Spark forms import pyspark when they run; the in-process forms never do
    from pyspark.sql import Column, DataFrame

__all__ = [
    "Components",
    "connected_components",
    "min_label_components",
    "survivor_key",
    "survivors_in_process",
]

logger = logging.getLogger(__name__)


@dataclass
class Components:
    assignments: DataFrame  # node, component (the smallest node id of its component)
    iterations: int


def _canonical(edges: DataFrame) -> DataFrame:
    """Edges as (child, parent) with parent < child, no self loops, no duplicates."""
    from pyspark.sql import functions as F

    return (
        edges.where(F.col("u") != F.col("v"))
        .select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v"))
        .distinct()
    )


def _large_star(edges: DataFrame) -> DataFrame:
    """Link every neighbour larger than u to m = min(u, neighbours of u); one group-by per round."""
    from pyspark.sql import functions as F

    both = edges.select("u", "v").unionByName(edges.select(F.col("v").alias("u"), F.col("u").alias("v")))
    grouped = both.groupBy("u").agg(F.collect_list("v").alias("ns"))
    linked = grouped.select(
        F.explode(
            F.expr("transform(filter(ns, x -> x > u), x -> struct(x AS u, least(u, array_min(ns)) AS v))")
        )
    )
    return _canonical(linked.select("col.u", "col.v"))


def _small_star(edges: DataFrame) -> DataFrame:
    """Link u and its smaller neighbours to m = the smallest of them (edges are canonical: v < u)."""
    from pyspark.sql import functions as F

    grouped = edges.groupBy("u").agg(F.collect_list("v").alias("ns"))
    linked = grouped.select(
        F.explode(
            F.expr(
                "concat(transform(ns, x -> struct(x AS u, array_min(ns) AS v)), array(struct(u AS u, array_min(ns) AS v)))"
            )
        )
    )
    return _canonical(linked.select("col.u", "col.v"))


def _is_star_forest(edges: DataFrame) -> bool:
    """True when no node of the canonical edge set is both a child (u) and a parent (v); one scan."""
    from pyspark.sql import functions as F

    roles = edges.select(
        F.explode(
            F.array(
                F.struct(F.col("u").alias("n"), F.lit(1).alias("r")),
                F.struct(F.col("v").alias("n"), F.lit(2).alias("r")),
            )
        ).alias("e")
    )
    both_roles = (
        roles.groupBy("e.n")
        .agg(F.min("e.r").alias("lo"), F.max("e.r").alias("hi"))
        .where(F.col("lo") != F.col("hi"))
    )
    return both_roles.isEmpty()


def connected_components(
    edges: DataFrame, src: str = "src", dst: str = "dst", max_iterations: int = 64
) -> Components:
    """Label every node that appears in ``edges`` with the smallest node id of its component."""
    from pyspark.sql import functions as F

    current = _canonical(edges.select(F.col(src).alias("u"), F.col(dst).alias("v")))
    iterations = 0
    while True:
        iterations += 1
        current = _small_star(_large_star(current)).localCheckpoint(eager=True)
        if _is_star_forest(current):
            break
        if iterations >= max_iterations:
            raise RuntimeError(f"connected components did not converge in {max_iterations} rounds")
    logger.info("connected components converged after %d rounds", iterations)
    assignments = (
        current.select(F.col("u").alias("node"), F.col("v").alias("component"))
        .unionByName(current.select(F.col("v").alias("node"), F.col("v").alias("component")))
        .distinct()
    )
    return Components(assignments=assignments, iterations=iterations)


def min_label_components(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """Label every node 0..n-1 with the smallest node of its component (edges ``a[i]``-``b[i]``).

    The in-process :func:`connected_components`: min-label propagation along the edges plus pointer
    jumping; labels only decrease and always name a node of the same component, so the fixed point (equal
    labels across every edge, ``label[label] == label``) is the component minimum. Returns the labels and
    the number of rounds.
    """
    label = np.arange(n, dtype=np.int64)
    rounds = 0
    while True:
        rounds += 1
        before = label.copy()
        low = np.minimum(label[a], label[b])
        np.minimum.at(label, a, low)
        np.minimum.at(label, b, low)
        while True:
            jumped = label[label]
            if np.array_equal(jumped, label):
                break
            label = jumped
        if np.array_equal(before, label):
            return label, rounds


def survivor_key(quality: str = "quality_score") -> Column:
    """The survivor rule as a Spark sort key over ``prior``, ``quality`` and ``node``; the smallest wins."""
    from pyspark.sql import functions as F

    value = F.col(quality)
    return F.struct(
        F.when(F.col("prior"), 0).otherwise(1).alias("prior_rank"),
        F.when(value.isNull(), 2).when(F.isnan(value), 0).otherwise(1).alias("quality_class"),
        F.when(F.isnan(value), F.lit(0.0)).otherwise(-value).alias("negative_quality"),
        F.col("node"),
    )


def survivors_in_process(
    component: np.ndarray, node: np.ndarray, prior: np.ndarray, quality: pa.Array | pa.ChunkedArray
) -> np.ndarray:
    """The survivor (a node number) of each member's component: the smallest :func:`survivor_key`.

    ``node`` numbers the members (in id order), ``quality`` is their quality (any numeric Arrow type). The
    key is the same (prior first; quality NaN, then numbers descending, then null; smallest node), and
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
