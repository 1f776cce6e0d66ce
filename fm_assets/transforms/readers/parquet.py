"""Parquet reader: one record per row, record_index = row number, streamed batch by batch.

Row groups are read one at a time so a corrupt row group costs only its own rows: it becomes a
single ``corrupt_file`` reject (``rows_lost`` in details) and reading goes on with the next group.
Text is read as raw bytes and decoded strictly, because Parquet writers do not all validate UTF-8.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .jsonl import record_from_fields
from .types import (
    CORRUPT_FILE,
    EMPTY_FILE,
    INVALID_UTF8,
    MISSING_TEXT,
    RECORD_TOO_LARGE,
    RawRecord,
    RawReject,
    raw_prefix,
    reject,
)

log = logging.getLogger(__name__)

BATCH_ROWS = 1024
# A damaged file can fail inside pyarrow in many ways: bad thrift metadata (ArrowException / OSError),
# undecodable column names (UnicodeDecodeError), absurd declared sizes (MemoryError).
_DAMAGE = (pa.ArrowException, OSError, ValueError, MemoryError)


def _is_text_like(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or pa.types.is_string_view(dtype)
        or pa.types.is_binary_view(dtype)
    )


def _column_values(column: pa.Array, name: str) -> list[Any]:
    """Python values of a non-text column; strings that are not valid UTF-8 are decoded with replacement."""
    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        log.warning("column %r holds invalid UTF-8; decoding it with replacement characters", name)
        raw = column.cast(pa.large_binary()).to_pylist()
        return [None if value is None else value.decode("utf-8", errors="replace") for value in raw]


def _row_prefix(fields: dict[str, Any], text: Any) -> bytes:
    shown = dict(fields)
    if isinstance(text, bytes | str):
        shown["__text_prefix__"] = (
            text[:1024].decode("utf-8", "replace") if isinstance(text, bytes) else text[:1024]
        )
    return json.dumps(shown, default=str, ensure_ascii=False)[:4096].encode("utf-8", errors="replace")


def _records_from_batch(
    batch: pa.RecordBatch, first_index: int, text_field: str, max_record_bytes: int
) -> Iterator[RawRecord | RawReject]:
    names = batch.schema.names
    other = [name for name in names if name != text_field]
    columns = {name: _column_values(batch.column(name), name) for name in other}
    if text_field in names and _is_text_like(batch.schema.field(text_field).type):
        texts: list[Any] | None = batch.column(text_field).cast(pa.large_binary()).to_pylist()
    elif text_field in names:
        texts = _column_values(batch.column(text_field), text_field)
    else:
        texts = None
    for row in range(batch.num_rows):
        index = first_index + row
        fields = {name: columns[name][row] for name in other}
        location = {"row": index}
        if texts is None:
            yield reject(
                index, MISSING_TEXT, _row_prefix(fields, None), why="absent", field=text_field, **location
            )
            continue
        value = texts[row]
        if isinstance(value, bytes):
            if len(value) > max_record_bytes:
                yield reject(
                    index,
                    RECORD_TOO_LARGE,
                    value,
                    size_bytes=len(value),
                    max_record_bytes=max_record_bytes,
                    **location,
                )
                continue
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield reject(
                    index,
                    INVALID_UTF8,
                    value,
                    error=exc.reason,
                    bad_byte_at=exc.start,
                    field=text_field,
                    **location,
                )
                continue
        fields[text_field] = value
        result = record_from_fields(index, fields, b"", text_field, location)
        if isinstance(result, RawReject):  # the row's prefix is only worth building for a reject
            result.raw_prefix = raw_prefix(_row_prefix(fields, value))
        yield result


def iter_parquet(path: Path, *, max_record_bytes: int, text_field: str) -> Iterator[RawRecord | RawReject]:
    try:
        parquet = pq.ParquetFile(path)
        metadata = parquet.metadata
    except _DAMAGE as exc:
        with open(path, "rb") as fh:
            head = fh.read(4096)
        yield reject(0, CORRUPT_FILE, head, error=str(exc), stage="open")
        return
    with parquet:
        if metadata.num_rows == 0:
            yield reject(0, EMPTY_FILE, b"", rows=0, row_groups=metadata.num_row_groups, format="parquet")
            return
        first_row = 0
        for group in range(metadata.num_row_groups):
            group_rows = metadata.row_group(group).num_rows
            batches = parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group])
            done = 0
            while True:
                try:
                    batch = next(batches, None)
                    items = (
                        []
                        if batch is None
                        else list(_records_from_batch(batch, first_row + done, text_field, max_record_bytes))
                    )
                except _DAMAGE as exc:
                    yield reject(
                        first_row + done, CORRUPT_FILE, b"",
                        error=str(exc), row_group=group, rows_lost=group_rows - done, stage="read",
                    )  # fmt: skip
                    break
                if batch is None:
                    break
                yield from items
                done += batch.num_rows
            first_row += group_rows
