"""Choose LSH banding (bands, rows) for a Jaccard threshold.

A pair with Jaccard ``s`` becomes a candidate with probability ``1 - (1 - s**rows)**bands``. The false
positive mass is that probability integrated over ``[0, threshold)``; the false negative mass is its
complement integrated over ``[threshold, 1]``. We pick the (bands, rows) with ``bands * rows <= num_perm``
minimising ``fp_weight * FP + fn_weight * FN``. Candidates are verified afterwards, so a false positive
costs only compute while a false negative is a missed duplicate: the default weights favour recall.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

_GRID = 2001


@dataclass(frozen=True)
class LshParams:
    bands: int
    rows: int
    false_positive: float
    false_negative: float

    def candidate_probability(self, similarity: float) -> float:
        return 1.0 - (1.0 - similarity**self.rows) ** self.bands


def _integrals(threshold: float, bands: int, rows: int) -> tuple[float, float]:
    low = np.linspace(0.0, threshold, _GRID)
    high = np.linspace(threshold, 1.0, _GRID)
    p_low = 1.0 - (1.0 - low**rows) ** bands
    p_high = 1.0 - (1.0 - high**rows) ** bands
    return float(np.trapezoid(p_low, low)), float(np.trapezoid(1.0 - p_high, high))


@lru_cache(maxsize=64)
def optimal_lsh_params(
    threshold: float, num_perm: int, fp_weight: float = 0.1, fn_weight: float = 0.9
) -> LshParams:
    """Minimise the weighted FP/FN probability mass over every (bands, rows) that fits in num_perm."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    best: tuple[float, LshParams] | None = None
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            fp, fn = _integrals(threshold, bands, rows)
            cost = fp_weight * fp + fn_weight * fn
            if best is None or cost < best[0] - 1e-15:
                best = (cost, LshParams(bands, rows, fp, fn))
    assert best is not None
    return best[1]
