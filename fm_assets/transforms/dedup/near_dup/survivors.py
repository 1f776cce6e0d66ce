"""Which document survives in each component, and which documents of this batch are removed.

The survivor rule is :mod:`fm_assets.transforms.dedup.clusters`' (prior index first, then the highest
``quality_score``, then the smallest ``doc_id``). ``cluster_id`` is the smallest ``doc_id`` in the component. Every other document of this batch in the component is removed
when its similarity to the survivor is at least ``min_survivor_similarity``; farther chain members are
kept. Removed documents are reported in :data:`REMOVED_SCHEMA`.

The Spark path judges in ``survivors_spark.judge_losers``, the in-process path (:mod:`.local`) through
``clusters.survivors_in_process``; both feed :func:`removed_table` (this module imports no pyspark).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

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
