"""Connected components of the similar pairs (``similarity >= threshold``), on Spark or in-process.

On Spark, a thin wrapper over :mod:`fm_assets.transforms.dedup.connected_components` (large-star/small-star):
edges are the scored candidate pairs ``a``-``b`` that pass the threshold. In-process (:mod:`.local`),
:func:`min_label_components` labels the same nodes with the same component: the smallest node of each.
"""

from __future__ import annotations

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fm_assets.transforms.dedup.connected_components import Components, connected_components

__all__ = ["Components", "min_label_components", "similar_components"]


def similar_components(scored: DataFrame, threshold: float) -> Components:
    """Components over the pairs of ``scored`` (a, b, similarity) with ``similarity >= threshold``."""
    return connected_components(scored.where(F.col("similarity") >= threshold), src="a", dst="b")


def min_label_components(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, int]:
    """Label every node 0..n-1 with the smallest node of its component (edges ``a[i]``-``b[i]``).

    With nodes numbered in ``doc_id`` order this is the Spark path's component id. Min-label propagation
    along the edges plus pointer jumping; labels only decrease and always name a node of the same
    component, so the fixed point (equal labels across every edge, ``label[label] == label``) is the
    component minimum. Returns the labels and the number of rounds.
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
