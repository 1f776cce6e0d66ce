"""Python's cyclic garbage collector, tuned for processes that import a large stack and then process batches.

A process of this platform imports ~2,700 modules (Dagster, SQLAlchemy, pyarrow, pyiceberg, lance) and
builds Dagster's object graphs, then runs units that allocate millions of short-lived objects (the quality
rules' words and n-grams). With the default thresholds (700, 10, 10) the collector walks the whole, still
growing heap again and again while it is built: ~0.15-0.4 s of an `fm run`'s start-up. Collection stays
on; it only runs less often, so reference cycles are still freed.
"""

from __future__ import annotations

import gc

# allocations before a young collection, and young / middle collections before an older one
BATCH_WORK_THRESHOLDS = (100_000, 50, 100)


def tune_for_batch_work() -> None:
    """Make collections rarer in this process (the ``fm`` CLI, a code location, a unit worker)."""
    gc.set_threshold(*BATCH_WORK_THRESHOLDS)
