"""The shard format: WebDataset ``.tar`` files of packed rows plus a per-shard row index.

A shard ``<name>.tar`` holds, for row ``r`` (key ``<name>/%08d``: unique across shards, which Energon
requires, and traceable to the shard), three members in this order:

* ``<key>.doclens`` - document lengths of the row, little-endian int32;
* ``<key>.json``    - ``{"doc_ids": [...], "n_tokens": n, "dtype": "uint16", "checksum": "<xxh3-64 hex>"}``;
* ``<key>.columns`` - only in format version 3, when the rows carry per-token columns (code structure ids,
  AST depth, ...): each column's ``n_tokens`` values as little-endian int32, one column after another in the
  order the ``.json`` lists under ``"columns"``;
* ``<key>.tokens``  - the row's tokens, little-endian uint16 (vocab < 65536) or uint32.

Headers are POSIX ustar with mtime 0, uid/gid 0, empty owner names and mode 0644, so identical rows give
identical bytes. ``webdataset`` and Megatron-Energon read the tar as it is.

``<name>.idx`` is the row index that gives O(1) random access without parsing the tar: a fixed header,
one fixed-size record per row (byte offset and length of the tokens payload, the row's document lengths
as a slice of a shared int32 array, the xxh3-64 checksum of the tokens bytes and of the doclens bytes, and
the low 32 bits of the xxh3-64 of the row's whole sample: all three members with their tar headers and
padding, so damage that webdataset or Energon readers would see is caught by ``fm_loader.verify``), the
doclens array, and an xxh3-64 footer over everything before it. The header's flags word says whether the
records carry sample checksums (``FLAG_SAMPLE_CHECKSUMS``). Format version 2 added them in the record
field that version 1 left reserved (zero), so version 1 shards and manifests still load and train;
``fm_loader.verify`` checks their tokens and doclens only and counts them in ``unchecked_members``.

Format version 3 (flag ``FLAG_COLUMNS``) adds per-token columns: after the doclens array the index holds the
column names (a length-prefixed JSON list, padded to 8 bytes) and one ``COLUMN_RECORD_DTYPE`` record per row
(byte offset of the ``.columns`` payload and its xxh3-64), so the columns are covered by a row checksum and by
the sample checksum like the tokens. A shard without columns is still written as version 2, byte for byte
what earlier writers produced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from fm_loader.row_index import (
    _INDEX_HEADER,  # noqa: F401 - re-exported: tests write older index versions through it
    COLUMN_DTYPE,
    COLUMN_RECORD_DTYPE,
    FLAG_COLUMNS,
    FLAG_SAMPLE_CHECKSUMS,
    FORMAT_VERSION,
    INDEX_MAGIC,
    INDEX_RECORD_DTYPE,
    PLAIN_FORMAT_VERSION,
    RECORD_WORDS,
    SUPPORTED_FORMAT_VERSIONS,
    WORD_DOC_START,
    WORD_SIZES,
    WORD_TOKENS_CHECKSUM,
    WORD_TOKENS_OFFSET,
    CorruptIndexError,
    RowIndex,
    decode_index,
    encode_index,
)
from fm_loader.tarwriter import SampleTar, sample_checksum32, tar_header, tar_padding

# the row index and the tar writer live in their own modules; this is the packed-token codec's public face
__all__ = [
    "COLUMN_DTYPE",
    "COLUMN_RECORD_DTYPE",
    "FLAG_COLUMNS",
    "FLAG_SAMPLE_CHECKSUMS",
    "FORMAT_VERSION",
    "INDEX_MAGIC",
    "INDEX_RECORD_DTYPE",
    "PLAIN_FORMAT_VERSION",
    "RECORD_WORDS",
    "SUPPORTED_FORMAT_VERSIONS",
    "WORD_DOC_START",
    "WORD_SIZES",
    "WORD_TOKENS_CHECKSUM",
    "WORD_TOKENS_OFFSET",
    "CorruptIndexError",
    "EncodedShard",
    "PackedRow",
    "RowIndex",
    "ShardInfo",
    "decode_index",
    "decode_row",
    "encode_index",
    "encode_shard",
    "row_checksum",
    "row_columns",
    "sample_checksum32",
    "schema_fingerprint",
    "tar_header",
    "tar_padding",
    "token_dtype_for",
]


def token_dtype_for(vocab_size: int) -> np.dtype:
    """uint16 when every id fits in 16 bits, else uint32."""
    return np.dtype("<u2") if vocab_size < 65536 else np.dtype("<u4")


def row_checksum(data: bytes | memoryview) -> int:
    """The per-row checksum stored in the index (xxh3-64 of the raw bytes)."""
    return xxhash.xxh3_64_intdigest(data)


def schema_fingerprint(vocab_size: int, format_version: int = FORMAT_VERSION) -> str:
    """Identifies the row layout (members, dtypes, index layout) for a vocabulary size and format version."""
    index = [list(field) for field in INDEX_RECORD_DTYPE.descr]
    if format_version == 1:
        index = [["reserved", *field[1:]] if field[0] == "sample_checksum" else field for field in index]
    desc: dict[str, Any] = {
        "format_version": format_version,
        "members": ["doclens:<i4", "json", f"tokens:{token_dtype_for(vocab_size).str}"],
        "index": index,
        "checksum": "xxh3_64",
    }
    if format_version >= 3:
        desc["members"].insert(2, f"columns:{COLUMN_DTYPE.str}")
        desc["columns_index"] = [list(field) for field in COLUMN_RECORD_DTYPE.descr]
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class PackedRow:
    """One context window: tokens of whole (or split) documents and where each document ends.

    Attributes:
        tokens: Token ids of the row, at most ``seq_len`` of them (any integer array; stored as uint16 or
            uint32 depending on the vocabulary size).
        doc_lens: Length of each document segment in the row, in order; positive and summing to
            ``len(tokens)``.
        doc_ids: Optional provenance id per document segment (empty, or one per entry of ``doc_lens``).
        columns: Optional per-token columns: name -> one int32 value per token, aligned with ``tokens``.
            Every row of a shard has the same column names.
    """

    tokens: np.ndarray
    doc_lens: Sequence[int]
    doc_ids: Sequence[str] = field(default_factory=list)
    columns: Mapping[str, np.ndarray] = field(default_factory=dict)

    def validate(self, seq_len: int, vocab_size: int) -> None:
        """Check that the row fits a shard of ``seq_len`` and ``vocab_size``.

        Args:
            seq_len: Maximum number of tokens in a row.
            vocab_size: Token ids must lie in ``[0, vocab_size)``.

        Raises:
            ValueError: Too many tokens, ``doc_lens`` not positive or not summing to the token count,
                ``doc_ids`` of the wrong length, or a token id out of range.
        """
        n = len(self.tokens)
        if n > seq_len:
            raise ValueError(f"row has {n} tokens, more than seq_len={seq_len}")
        if int(sum(self.doc_lens)) != n or any(d <= 0 for d in self.doc_lens):
            raise ValueError(f"doc_lens {list(self.doc_lens)} must be positive and sum to {n} tokens")
        if self.doc_ids and len(self.doc_ids) != len(self.doc_lens):
            raise ValueError("doc_ids must have one entry per document segment")
        if n and (int(np.min(self.tokens)) < 0 or int(np.max(self.tokens)) >= vocab_size):
            raise ValueError(f"token ids must lie in [0, {vocab_size})")
        for name, values in self.columns.items():
            if len(values) != n:
                raise ValueError(f"column {name!r} has {len(values)} values for a row of {n} tokens")
            if len(values) and (np.min(values) < -(2**31) or np.max(values) >= 2**31):
                raise ValueError(f"column {name!r} has values outside int32")


@dataclass(frozen=True)
class ShardInfo:
    """What the pipeline records about one encoded shard.

    Attributes:
        name: Shard name given to :func:`encode_shard`.
        tar_name: File name of the tar (``<name>.tar``).
        index_name: File name of the row index (``<name>.idx``).
        sha256: SHA-256 of the tar bytes (hex).
        index_sha256: SHA-256 of the index bytes (hex).
        rows: Number of rows.
        tokens: Number of tokens over all rows.
        bytes: Size of the tar in bytes.
        max_docs_per_row: Largest number of document segments in one row.
        seq_len: Row length the shard was encoded for.
        vocab_size: Vocabulary size the shard was encoded for.
        format_version: Layout written: 2 without per-token columns, 3 with them.
        columns: Names of the per-token columns every row carries (empty for version 2).
    """

    name: str
    tar_name: str
    index_name: str
    sha256: str
    index_sha256: str
    rows: int
    tokens: int
    bytes: int
    max_docs_per_row: int
    seq_len: int
    vocab_size: int
    format_version: int = PLAIN_FORMAT_VERSION
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class EncodedShard:
    """The files of one encoded shard and its summary.

    Attributes:
        files: File name -> bytes: ``<name>.tar`` and ``<name>.idx``, to be written side by side.
        info: What to record about the shard (e.g. with :meth:`fm_loader.manifest.ShardEntry.from_info`).
    """

    files: dict[str, bytes]
    info: ShardInfo


def encode_shard(rows: Iterable[PackedRow], shard_name: str, seq_len: int, vocab_size: int) -> EncodedShard:
    """Encode rows into the bytes of ``<shard_name>.tar`` and ``<shard_name>.idx``.

    Identical input gives identical bytes (no timestamps or owners in the tar).

    Args:
        rows: The rows, in shard order.
        shard_name: Name of the shard; also the prefix of every sample key (``<shard_name>/%08d``).
        seq_len: Maximum tokens per row.
        vocab_size: Vocabulary size; tokens are stored as uint16 below 65536, else uint32.

    Returns:
        The two files' bytes (nothing is written to disk) and the shard's :class:`ShardInfo`.

    Raises:
        ValueError: A row fails :meth:`PackedRow.validate`, or rows of the shard carry different columns.
    """
    dtype = token_dtype_for(vocab_size)
    tar = SampleTar()
    add_member = tar.add_member
    records: list[tuple[int, ...]] = []
    column_records: list[tuple[int, int]] = []
    column_names: tuple[str, ...] | None = None
    all_doclens: list[np.ndarray] = []
    doc_cursor = 0
    total_tokens = 0
    max_docs = 0

    for index, row in enumerate(rows):
        row.validate(seq_len, vocab_size)
        names = tuple(sorted(row.columns))
        if column_names is None:
            column_names = names
        elif names != column_names:
            raise ValueError(
                f"{shard_name} row {index} has columns {list(names)}, earlier rows {list(column_names)}: "
                "every row of a shard carries the same per-token columns"
            )
        key = f"{shard_name}/{index:08d}"
        tokens = np.ascontiguousarray(row.tokens, dtype=dtype).tobytes()
        doclens_arr = np.asarray(row.doc_lens, dtype="<i4")
        doclens = doclens_arr.tobytes()
        tokens_checksum = row_checksum(tokens)
        meta = {
            "checksum": f"{tokens_checksum:016x}",
            "doc_ids": list(row.doc_ids),
            "dtype": dtype.name,
            "n_tokens": len(row.tokens),
        }
        if names:
            meta["columns"] = list(names)
        add_member(f"{key}.doclens", doclens)
        meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
        meta_offset = add_member(f"{key}.json", meta_bytes)
        if names:
            payload = b"".join(
                np.ascontiguousarray(row.columns[name], dtype=COLUMN_DTYPE).tobytes() for name in names
            )
            column_records.append((add_member(f"{key}.columns", payload), row_checksum(payload)))
        tokens_offset = add_member(f"{key}.tokens", tokens)
        sample_checksum, _ = tar.end_sample()
        n_docs = len(doclens_arr)
        records.append(
            (
                tokens_offset,
                len(row.tokens),
                n_docs,
                doc_cursor,
                meta_offset,
                len(meta_bytes),
                sample_checksum,
                tokens_checksum,
                row_checksum(doclens),
            )
        )
        all_doclens.append(doclens_arr)
        doc_cursor += n_docs
        total_tokens += len(row.tokens)
        max_docs = max(max_docs, n_docs)
    tar_bytes = tar.finish()

    columns = column_names or ()
    index_bytes = encode_index(
        np.array(records, dtype=INDEX_RECORD_DTYPE),
        np.concatenate(all_doclens) if all_doclens else np.zeros(0, "<i4"),
        itemsize=dtype.itemsize,
        seq_len=seq_len,
        vocab_size=vocab_size,
        columns=columns,
        column_records=np.array(column_records, dtype=COLUMN_RECORD_DTYPE),
    )
    tar_name, index_name = f"{shard_name}.tar", f"{shard_name}.idx"
    info = ShardInfo(
        name=shard_name,
        tar_name=tar_name,
        index_name=index_name,
        sha256=hashlib.sha256(tar_bytes).hexdigest(),
        index_sha256=hashlib.sha256(index_bytes).hexdigest(),
        rows=len(records),
        tokens=total_tokens,
        bytes=len(tar_bytes),
        max_docs_per_row=max_docs,
        seq_len=seq_len,
        vocab_size=vocab_size,
        format_version=FORMAT_VERSION if columns else PLAIN_FORMAT_VERSION,
        columns=columns,
    )
    return EncodedShard(files={tar_name: tar_bytes, index_name: index_bytes}, info=info)


def row_columns(tar_bytes: bytes | memoryview, index: RowIndex, row: int) -> dict[str, np.ndarray]:
    """One row's per-token columns (name -> int32 values), verified against the index's checksum.

    Raises:
        ValueError: The columns' bytes do not match their checksum.
    """
    if not index.columns or index.column_records is None:
        return {}
    n = int(index.records[row]["n_tokens"])
    rec = index.column_records[row]
    start = int(rec["columns_offset"])
    payload = memoryview(tar_bytes)[start : start + 4 * n * len(index.columns)]
    if row_checksum(payload) != int(rec["columns_checksum"]):
        raise ValueError(f"row {row}: per-token columns checksum mismatch")
    values = np.frombuffer(payload, COLUMN_DTYPE).reshape(len(index.columns), n)
    return {name: values[i].copy() for i, name in enumerate(index.columns)}


def decode_row(tar_bytes: bytes | memoryview, index: RowIndex, row: int) -> PackedRow:
    """Decode one row (tokens, doc lengths, provenance ids) from a shard's bytes, verifying its checksum."""
    rec = index.records[row]
    buf = memoryview(tar_bytes)
    start = int(rec["tokens_offset"])
    payload = buf[start : start + int(rec["n_tokens"]) * index.token_itemsize]
    if row_checksum(payload) != int(rec["tokens_checksum"]):
        raise ValueError(f"row {row}: tokens checksum mismatch")
    dtype = np.dtype("<u2") if index.token_itemsize == 2 else np.dtype("<u4")
    doc_start = int(rec["doc_start"])
    doc_lens = index.doclens[doc_start : doc_start + int(rec["n_docs"])]
    meta_start = int(rec["meta_offset"])
    meta = json.loads(bytes(buf[meta_start : meta_start + int(rec["meta_size"])]))
    return PackedRow(
        np.frombuffer(payload, dtype=dtype).copy(),
        doc_lens.tolist(),
        meta.get("doc_ids", []),
        row_columns(tar_bytes, index, row),
    )
