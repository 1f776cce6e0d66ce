"""Distributed connected components on a Spark edge DataFrame (large-star / small-star).

Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC 2014): alternate
*large-star* (every node links its larger neighbours to the smallest node it sees) and *small-star*
(every node links itself and its smaller neighbours to the smallest of them). Every step is a
group-by and a join; no edge list is ever collected to the driver.

Convergence is checked exactly and cheaply: the rounds end once the canonical edge set (child,
parent) with parent < child is a *star forest*, i.e. no node is both a child and a parent. Such a
set is a fixed point of both steps and every star's centre is its component's smallest node. The
check is one aggregate over the round's locally checkpointed edges (no set difference against the
previous round, and no extra round to confirm the fixed point). Checkpointing keeps the plan short:
a round reads its input twice, so un-truncated plans double in size every round.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

logger = logging.getLogger(__name__)


@dataclass
class Components:
    assignments: DataFrame  # node, component (the smallest node id of its component)
    iterations: int


def _canonical(edges: DataFrame) -> DataFrame:
    """Edges as (child, parent) with parent < child, no self loops, no duplicates."""
    return (
        edges.where(F.col("u") != F.col("v"))
        .select(F.greatest("u", "v").alias("u"), F.least("u", "v").alias("v"))
        .distinct()
    )


def _large_star(edges: DataFrame) -> DataFrame:
    """Link every neighbour larger than u to m = min(u, neighbours of u); one group-by per round."""
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
