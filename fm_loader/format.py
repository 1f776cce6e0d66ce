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
import io
import json
import struct
import sys
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
_BLOCK = 512
RECORD_WORDS = INDEX_RECORD_DTYPE.itemsize // 8  # tokens_offset, n_tokens | n_docs << 32, doc_start, ...
WORD_TOKENS_OFFSET, WORD_SIZES, WORD_DOC_START, WORD_TOKENS_CHECKSUM = 0, 1, 2, 5


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


def tar_header(name: str, size: int) -> bytes:
    """A reproducible ustar header for a member of ``size`` bytes (mtime 0, owner 0, mode 0644); the media
    shard writer uses it too."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")


def tar_padding(n: int) -> int:
    """How many zero bytes pad a member of ``n`` bytes to the next 512-byte tar block."""
    return (-n) % _BLOCK


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
    tar = io.BytesIO()
    records: list[tuple[int, ...]] = []
    column_records: list[tuple[int, int]] = []
    column_names: tuple[str, ...] | None = None
    all_doclens: list[np.ndarray] = []
    doc_cursor = 0
    total_tokens = 0
    max_docs = 0

    sample = bytearray()

    def add_member(name: str, payload: bytes) -> int:
        """Append a member to the current sample; returns its payload's offset in the tar."""
        sample.extend(tar_header(name, len(payload)))
        offset = tar.tell() + len(sample)
        sample.extend(payload)
        sample.extend(b"\0" * tar_padding(len(payload)))
        return offset

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
        sample_checksum = sample_checksum32(sample)
        tar.write(sample)
        sample.clear()
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
    tar.write(b"\0" * (2 * _BLOCK))
    tar_bytes = tar.getvalue()

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


def sample_checksum32(data: bytes | bytearray | memoryview) -> int:
    return xxhash.xxh3_64_intdigest(data) & 0xFFFFFFFF


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
