"""Schemas of the token-level stage outputs: tokenized documents, packed rows and the shard row map.

Per-token columns (code structure ids, AST depth, dependency level, chunk ids, ...) travel by a naming
convention: a column of the tokenize output named ``tok_<name>`` holding a list of integers per document, one
per token, is carried by ``pack`` into ``PACKED_SCHEMA``'s ``token_columns`` (a list of ``{name, values}``,
aligned with the row's tokens, split documents included) and stored by ``shard`` as the shard's per-token
column ``<name>`` (:mod:`fm_loader.format` version 3). A document whose list is null gets
:data:`MISSING_TOKEN_VALUE` for each of its tokens; a list of another length than the document's tokens
fails the stage naming the document and the column.
"""

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

TOKEN_COLUMN_PREFIX = "tok_"
"""Tokenize-output columns named ``tok_<name>`` (lists of ints, one per token) are per-token columns."""
MISSING_TOKEN_VALUE = -1
"""Stored for every token of a document that has no value for a per-token column of its batch."""
TOKEN_COLUMNS_TYPE = pa.list_(
    pa.struct([pa.field("name", pa.string()), pa.field("values", pa.large_list(pa.int32()))])
)
"""A packed row's per-token columns: ``[{name, values}]``, one int32 per token of the row for each (null when
the batch has none). Not a map: Parquet gives a map's entries a name that changes the schema fingerprint."""

PACKED_SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),
        pa.field("tokens", pa.large_list(pa.uint32())),
        pa.field("doc_lens", pa.list_(pa.int32())),
        pa.field(
            "doc_ids", pa.list_(pa.string())
        ),  # "<cas16>:<record>" or "<cas16>:<record>@<token offset>" for pieces
        pa.field("token_columns", TOKEN_COLUMNS_TYPE),
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


def token_column_names(schema: pa.Schema) -> list[str]:
    """The per-token columns a tokenize-stage output holds (names without the ``tok_`` prefix), sorted."""
    return sorted(
        f.name[len(TOKEN_COLUMN_PREFIX) :]
        for f in schema
        if f.name.startswith(TOKEN_COLUMN_PREFIX)
        and (pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
        and pa.types.is_integer(f.type.value_type)
    )


def token_columns_array(columns: dict[str, tuple[np.ndarray, np.ndarray]], rows: int) -> pa.Array:
    """The ``token_columns`` of ``rows`` packed rows from name -> (values, row offsets); null rows without any."""
    if not columns:
        return pa.nulls(rows, TOKEN_COLUMNS_TYPE)
    names = sorted(columns)
    width = len(names)
    row_offsets = columns[names[0]][1]
    total = int(row_offsets[-1])
    stacked = np.concatenate([np.asarray(columns[name][0], np.int32) for name in names])
    # map items in row-major order (row 0: every column, row 1: ...); item (r, k) is stacked[k*total + ro[r]:]
    lengths = np.repeat(np.diff(row_offsets), width)
    item_starts = (np.arange(width)[None, :] * total + row_offsets[:-1, None]).reshape(-1)
    item_offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=item_offsets[1:])
    gather = np.repeat(item_starts - item_offsets[:-1], lengths) + np.arange(int(item_offsets[-1]))
    values = pa.LargeListArray.from_arrays(
        pa.array(item_offsets, pa.int64()), pa.array(stacked[gather], pa.int32())
    )
    entries = pa.StructArray.from_arrays(
        [pa.array(names * rows, pa.string()), values], names=["name", "values"]
    )
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * width, pa.int32())
    return pa.ListArray.from_arrays(offsets, entries, type=TOKEN_COLUMNS_TYPE)


def row_token_columns(array: pa.Array | pa.ChunkedArray) -> list[dict[str, np.ndarray]]:
    """Per packed row, its per-token columns (name -> int32 values); empty dicts for null rows."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    assert isinstance(array, pa.ListArray)
    if array.null_count == len(array):
        return [{} for _ in range(len(array))]
    row_offsets = array.offsets.to_numpy(zero_copy_only=False)
    entries = array.values
    assert isinstance(entries, pa.StructArray)
    names_array, values_array = entries.flatten()
    names = names_array.to_pylist()
    assert isinstance(values_array, pa.LargeListArray)
    value_offsets = values_array.offsets.to_numpy(zero_copy_only=False)
    values = values_array.values.to_numpy(zero_copy_only=False)
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    out: list[dict[str, np.ndarray]] = []
    for r in range(len(array)):
        items = range(int(row_offsets[r]), int(row_offsets[r + 1])) if valid[r] else range(0)
        out.append({names[i]: values[value_offsets[i] : value_offsets[i + 1]] for i in items})
    return out
