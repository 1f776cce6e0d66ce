"""dedup: exact duplicates by content hash, within the batch and against every earlier batch.

The chain-independent rule is ``engine.kinds.exact_dedup``; here the key is ``content_hash(text)`` and each
batch leaves ``kept_hashes.parquet`` (hash, doc_id) for later batches to check against.
"""

from __future__ import annotations

import pyarrow as pa

from fm_assets.engine.hashing import content_hash
from fm_assets.engine.kinds.exact_dedup import DedupKey, ExactDedupStage

KEPT_HASHES = "kept_hashes.parquet"


class DedupStage(ExactDedupStage):
    name = "dedup"
    code_version = "dedup-v1"
    upstream = "filter"
    description = "Exact content-hash dedup within the batch and across all earlier batches."
    dedup_key = DedupKey(
        column="text",
        index_file=KEPT_HASHES,
        index_field=pa.field("hash", pa.binary(16)),
        artifact="kept_hashes",
        of=content_hash,
    )
    batch_rows = 4096


STAGE = DedupStage()
