"""Distributed connected components on a Spark edge DataFrame (large-star / small-star).

Kiveris et al., "Connected Components in MapReduce and Beyond" (SoCC 2014): alternate
*large-star* (every node links its larger neighbours to the smallest node it sees) and *small-star*
(every node links itself and its smaller neighbours to the smallest of them) until the edge set stops
changing. At the fixed point every component is a star centred on its smallest node id. Every step is a
group-by and a join; no edge list is ever collected to the driver. Each round's edges are
checkpointed locally so the query plan stays short.
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
    both = edges.select("u", "v").unionByName(edges.select(F.col("v").alias("u"), F.col("u").alias("v")))
    smallest = both.groupBy("u").agg(F.min("v").alias("m")).select("u", F.least("u", "m").alias("m"))
    linked = both.join(smallest, "u").where(F.col("v") > F.col("u"))
    return _canonical(linked.select(F.col("v").alias("u"), F.col("m").alias("v")))


def _small_star(edges: DataFrame) -> DataFrame:
    # edges are canonical: v < u, so v is a smaller neighbour of u
    smallest = edges.groupBy("u").agg(F.min("v").alias("m"))
    neighbours = edges.join(smallest, "u").select(F.col("v").alias("u"), F.col("m").alias("v"))
    own = smallest.select("u", F.col("m").alias("v"))
    return _canonical(neighbours.unionByName(own))


def connected_components(
    edges: DataFrame, src: str = "src", dst: str = "dst", max_iterations: int = 64
) -> Components:
    """Label every node that appears in ``edges`` with the smallest node id of its component."""
    current = _canonical(edges.select(F.col(src).alias("u"), F.col(dst).alias("v"))).localCheckpoint(eager=True)
    iterations = 0
    while True:
        iterations += 1
        nxt = _small_star(_large_star(current)).localCheckpoint(eager=True)
        changed = not (nxt.exceptAll(current).isEmpty() and current.exceptAll(nxt).isEmpty())
        current = nxt
        if not changed:
            break
        if iterations >= max_iterations:
            raise RuntimeError(f"connected components did not converge in {max_iterations} rounds")
    logger.info("connected components converged after %d rounds", iterations)
    assignments = current.select(F.col("u").alias("node"), F.col("v").alias("component")).unionByName(
        current.select(F.col("v").alias("node"), F.col("v").alias("component"))
    ).distinct()
    return Components(assignments=assignments, iterations=iterations)
