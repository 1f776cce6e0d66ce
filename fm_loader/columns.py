"""Per-token columns beside ``input_ids`` (code structure ids, AST depth, chunk ids, ...).

A trainer asks for ``extra_columns={"name": fill_value}``; every batch then has a ``(B, T)`` int32 tensor per
name, whatever the sources hold: rows of shards that store the column (format version 3, see
:mod:`fm_loader.format`) get their values aligned with their tokens, every other position (sources without
the column, padding, the tail of short rows) holds the declared fill. The key set never depends on the data,
so a compiled step sees the same keys and shapes on every batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import xxhash

from fm_loader.batching import BATCH_KEYS
from fm_loader.format import COLUMN_DTYPE
from fm_loader.sources import CorruptRowError, TarShardRows

logger = logging.getLogger(__name__)

_INT32 = np.iinfo(np.int32)


def validate_extra_columns(extra_columns: Mapping[str, int] | None) -> dict[str, int]:
    """``extra_columns`` as a plain dict, refusing names that clash with batch keys and fills beyond int32.

    Raises:
        ValueError: A name is empty, not a string or a built-in batch key; a fill is not an int32 integer.
    """
    if extra_columns is None:
        return {}
    if not isinstance(extra_columns, Mapping):
        raise ValueError(
            f"extra_columns maps column names to fill values, e.g. {{'ast_depth': -1}}, got {extra_columns!r}"
        )
    out: dict[str, int] = {}
    for name, fill in extra_columns.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"extra_columns: a column name is a non-empty string, got {name!r}")
        if name in BATCH_KEYS:
            raise ValueError(f"extra_columns: {name!r} is a built-in batch key; name the column otherwise")
        if (
            isinstance(fill, bool)
            or not isinstance(fill, (int, np.integer))
            or not _INT32.min <= fill <= _INT32.max
        ):
            raise ValueError(
                f"extra_columns[{name!r}]: the fill value is an int32 integer (0 for category-like columns, -1 "
                f"for sentinels), got {fill!r}"
            )
        out[name] = int(fill)
    return out


def copy_row_columns(
    reader: TarShardRows,
    row: int,
    slot: int,
    n_tokens: int,
    out: Mapping[str, np.ndarray],
    skip_corrupt: bool,
) -> None:
    """Copy the requested columns ``reader``'s row ``row`` stores into ``out[name][slot, :n_tokens]``.

    The payload is checked against the index's checksum; a mismatch is re-read from the file, and a second
    mismatch raises :class:`CorruptRowError` (with ``skip_corrupt``: logged, and the row keeps its fills).
    """
    index = reader.index
    if not index.columns or index.column_records is None or not n_tokens:
        return
    wanted = [(k, name) for k, name in enumerate(index.columns) if name in out]
    if not wanted:
        return
    record = index.column_records[row]
    start, want = int(record["columns_offset"]), int(record["columns_checksum"])
    size = 4 * n_tokens * len(index.columns)
    payload: bytes | memoryview = reader.token_bytes[start : start + size]
    if xxhash.xxh3_64_intdigest(payload) != want:
        payload = reader.reread(start, size)
        if xxhash.xxh3_64_intdigest(payload) != want:
            if not skip_corrupt:
                raise CorruptRowError(reader.label, row, "per-token columns checksum mismatch")
            logger.warning(
                "per-token columns of row %d of %s are corrupt: left at their fill", row, reader.label
            )
            return
    values = np.frombuffer(payload, COLUMN_DTYPE).reshape(len(index.columns), n_tokens)
    for k, name in wanted:
        out[name][slot, :n_tokens] = values[k]
