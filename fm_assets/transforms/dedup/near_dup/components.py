"""Connected components of the similar pairs (``similarity >= threshold``), on Spark.

A thin wrapper over :mod:`fm_assets.transforms.dedup.connected_components` (large-star/small-star):
edges are the scored candidate pairs ``a``-``b`` that pass the threshold.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fm_assets.transforms.dedup.connected_components import Components, connected_components

__all__ = ["Components", "similar_components"]


def similar_components(scored: DataFrame, threshold: float) -> Components:
    """Components over the pairs of ``scored`` (a, b, similarity) with ``similarity >= threshold``."""
    return connected_components(scored.where(F.col("similarity") >= threshold), src="a", dst="b")
