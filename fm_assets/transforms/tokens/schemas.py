"""Schemas of the token-level stage outputs: tokenized documents, packed rows and the shard row map."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

PROVENANCE_FIELDS = [
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("batch", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("license", pa.string(), nullable=False),
    pa.field("namespace", pa.string(), nullable=False),
    pa.field("cas_hash", pa.string(), nullable=False),
    pa.field("record_index", pa.int64(), nullable=False),
]

TOKENS_SCHEMA = pa.schema(
    [
        *PROVENANCE_FIELDS,
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("tokens", pa.large_list(pa.uint32())),
    ]
)

PACKED_SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("tokens", pa.large_list(pa.uint32())),
        pa.field("doc_lens", pa.list_(pa.int32())),
        pa.field(
            "doc_ids", pa.list_(pa.string())
        ),  # "<cas16>:<record>" or "<cas16>:<record>@<token offset>" for pieces
    ]
)

SHARD_ROWS_SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("shard", pa.string(), nullable=False),
        pa.field("row_in_shard", pa.int32(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("doc_ids", pa.list_(pa.string())),
    ]
)


def flat_tokens(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets) of a large_list<uint32> column without going through Python lists."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    values = array.values.to_numpy(zero_copy_only=False)
    return values, offsets - offsets[0] if len(offsets) else offsets


def token_list_array(values: np.ndarray, offsets: np.ndarray) -> pa.LargeListArray:
    return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values, pa.uint32()))
