"""The row index of a packed-token shard (``.idx``): its layout constants, writer and verified reader.

Header (magic, version, token itemsize, seq_len, flags, vocab, rows), one ``INDEX_RECORD_DTYPE`` record per
row, the document lengths of every row, optionally the per-token column names and records, and an xxh3-64
footer over everything before it. :mod:`fm_loader.format` re-exports every name.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xxhash

FORMAT_VERSION = 3
PLAIN_FORMAT_VERSION = 2  # what a shard without per-token columns is written as
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)  # 1 has no sample checksums; 3 may add per-token columns
INDEX_MAGIC = b"FMROWIX1"
_INDEX_HEADER = struct.Struct("<8sIIIIQQ")  # magic, version, token itemsize, seq_len, flags, vocab, rows
FLAG_SAMPLE_CHECKSUMS = (
    1  # records' sample_checksum holds xxh3-64 & 0xffffffff of the row's whole sample bytes
)
FLAG_COLUMNS = 2  # the index ends with the column names and a COLUMN_RECORD_DTYPE record per row
COLUMN_DTYPE = np.dtype("<i4")
COLUMN_RECORD_DTYPE = np.dtype([("columns_offset", "<u8"), ("columns_checksum", "<u8")])
INDEX_RECORD_DTYPE = np.dtype(
    [
        ("tokens_offset", "<u8"),  # byte offset of the tokens payload inside the tar
        ("n_tokens", "<u4"),
        ("n_docs", "<u4"),
        ("doc_start", "<u8"),  # first entry of this row in the index's doclens array
        ("meta_offset", "<u8"),  # byte offset of the row's .json payload inside the tar
        ("meta_size", "<u4"),
        ("sample_checksum", "<u4"),  # low 32 bits of xxh3-64 over the sample's bytes (FLAG_SAMPLE_CHECKSUMS)
        ("tokens_checksum", "<u8"),
        ("doclens_checksum", "<u8"),
    ]
)
RECORD_WORDS = INDEX_RECORD_DTYPE.itemsize // 8  # tokens_offset, n_tokens | n_docs << 32, doc_start, ...
WORD_TOKENS_OFFSET, WORD_SIZES, WORD_DOC_START, WORD_TOKENS_CHECKSUM = 0, 1, 2, 5


def encode_index(
    records: np.ndarray,
    doclens: np.ndarray,
    *,
    itemsize: int,
    seq_len: int,
    vocab_size: int,
    flags: int = FLAG_SAMPLE_CHECKSUMS,
    columns: Sequence[str] = (),
    column_records: np.ndarray | None = None,
) -> bytes:
    """The ``.idx`` bytes: version 2 without ``columns``, version 3 (``FLAG_COLUMNS``) with them."""
    version = FORMAT_VERSION if columns else PLAIN_FORMAT_VERSION
    if columns:
        flags |= FLAG_COLUMNS
    header = _INDEX_HEADER.pack(INDEX_MAGIC, version, itemsize, seq_len, flags, vocab_size, len(records))
    body = header + records.astype(INDEX_RECORD_DTYPE).tobytes() + doclens.astype("<i4").tobytes()
    if columns:
        names = json.dumps(list(columns), separators=(",", ":")).encode()
        body += struct.pack("<I", len(names)) + names
        body += b"\0" * (-len(body) % 8)
        assert column_records is not None and len(column_records) == len(records)
        body += column_records.astype(COLUMN_RECORD_DTYPE).tobytes()
    return body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body))


_NO_BYTES = memoryview(b"")


@dataclass(frozen=True)
class RowIndex:
    """A decoded ``.idx`` file."""

    records: np.ndarray
    doclens: np.ndarray
    token_itemsize: int
    seq_len: int
    vocab_size: int
    # The records as 64-bit words (RECORD_WORDS per row), for per-row reads without numpy scalar overhead:
    # a memoryview on little-endian hosts, else a numpy view that byte-swaps.
    words: Any = None
    # The raw bytes of the records and of the doclens array (byte memoryviews into the index file), so that the
    # loader can gather a batch's records and document lengths with one ``bytes.join`` each.
    record_bytes: memoryview = _NO_BYTES
    doclens_bytes: memoryview = _NO_BYTES
    flags: int = 0
    columns: tuple[str, ...] = ()  # per-token column names (format version 3), in payload order
    column_records: np.ndarray | None = None  # COLUMN_RECORD_DTYPE per row when ``columns``

    @property
    def rows(self) -> int:
        return len(self.records)


class CorruptIndexError(ValueError):
    """The index file does not match its own footer checksum or layout."""


def decode_index(data: bytes | memoryview, source: str = "<index>") -> RowIndex:
    """Parse and verify an ``.idx`` file."""
    buf = memoryview(data)
    if len(buf) < _INDEX_HEADER.size + 8:
        raise CorruptIndexError(f"{source}: index too short")
    (footer,) = struct.unpack("<Q", buf[-8:])
    if xxhash.xxh3_64_intdigest(buf[:-8]) != footer:
        raise CorruptIndexError(f"{source}: index checksum mismatch")
    magic, version, itemsize, seq_len, flags, vocab_size, n_rows = _INDEX_HEADER.unpack_from(buf, 0)
    if magic != INDEX_MAGIC:
        raise CorruptIndexError(f"{source}: not an fm_loader row index (magic={magic!r})")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise CorruptIndexError(
            f"{source}: row index format version {version}; this fm_loader reads versions "
            f"{SUPPORTED_FORMAT_VERSIONS}: upgrade fm_loader"
        )
    start = _INDEX_HEADER.size
    end = start + n_rows * INDEX_RECORD_DTYPE.itemsize
    records = np.frombuffer(buf[start:end], dtype=INDEX_RECORD_DTYPE)
    doclens_end = len(buf) - 8
    columns: tuple[str, ...] = ()
    column_records = None
    if flags & FLAG_COLUMNS:
        n_docs = int(records["doc_start"][-1]) + int(records["n_docs"][-1]) if n_rows else 0
        doclens_end = end + 4 * n_docs
        try:
            (names_len,) = struct.unpack_from("<I", buf, doclens_end)
            names_end = doclens_end + 4 + names_len
            columns = tuple(json.loads(bytes(buf[doclens_end + 4 : names_end])))
            table = names_end + (-names_end % 8)
            column_records = np.frombuffer(
                buf[table : table + n_rows * COLUMN_RECORD_DTYPE.itemsize], COLUMN_RECORD_DTYPE
            )
        except (struct.error, ValueError) as exc:
            raise CorruptIndexError(f"{source}: per-token column section unreadable ({exc})") from exc
        if len(column_records) != n_rows:
            raise CorruptIndexError(f"{source}: per-token column section is truncated")
    doclens = np.frombuffer(buf[end:doclens_end], dtype="<i4")
    raw = buf[start:end].cast("B")
    words = raw.cast("Q") if sys.byteorder == "little" else np.frombuffer(raw, "<u8")
    return RowIndex(
        records,
        doclens,
        itemsize,
        seq_len,
        vocab_size,
        words,
        raw,
        buf[end:doclens_end].cast("B"),
        flags,
        columns,
        column_records,
    )
