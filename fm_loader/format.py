"""The shard format: WebDataset ``.tar`` files of packed rows plus a per-shard row index.

A shard ``<name>.tar`` holds, for row ``r`` (key ``<name>/%08d``: unique across shards, which Energon
requires, and traceable to the shard), three members in this order:

* ``<key>.doclens`` - document lengths of the row, little-endian int32;
* ``<key>.json``    - ``{"doc_ids": [...], "n_tokens": n, "dtype": "uint16", "checksum": "<xxh3-64 hex>"}``;
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
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

FORMAT_VERSION = 2
SUPPORTED_FORMAT_VERSIONS = (1, 2)  # same layout; 1 has no sample checksums
INDEX_MAGIC = b"FMROWIX1"
_INDEX_HEADER = struct.Struct("<8sIIIIQQ")  # magic, version, token itemsize, seq_len, flags, vocab, rows
FLAG_SAMPLE_CHECKSUMS = (
    1  # records' sample_checksum holds xxh3-64 & 0xffffffff of the row's whole sample bytes
)
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
    desc = {
        "format_version": format_version,
        "members": ["doclens:<i4", "json", f"tokens:{token_dtype_for(vocab_size).str}"],
        "index": index,
        "checksum": "xxh3_64",
    }
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
    """

    tokens: np.ndarray
    doc_lens: Sequence[int]
    doc_ids: Sequence[str] = field(default_factory=list)

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


@dataclass(frozen=True)
class EncodedShard:
    """The files of one encoded shard and its summary.

    Attributes:
        files: File name -> bytes: ``<name>.tar`` and ``<name>.idx``, to be written side by side.
        info: What to record about the shard (e.g. with :meth:`fm_loader.manifest.ShardEntry.from_info`).
    """

    files: dict[str, bytes]
    info: ShardInfo


def _tar_header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")


def _pad(n: int) -> int:
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
        ValueError: A row fails :meth:`PackedRow.validate`.
    """
    dtype = token_dtype_for(vocab_size)
    tar = io.BytesIO()
    records: list[tuple[int, ...]] = []
    all_doclens: list[np.ndarray] = []
    doc_cursor = 0
    total_tokens = 0
    max_docs = 0

    sample = bytearray()

    def add_member(name: str, payload: bytes) -> int:
        """Append a member to the current sample; returns its payload's offset in the tar."""
        sample.extend(_tar_header(name, len(payload)))
        offset = tar.tell() + len(sample)
        sample.extend(payload)
        sample.extend(b"\0" * _pad(len(payload)))
        return offset

    for index, row in enumerate(rows):
        row.validate(seq_len, vocab_size)
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
        add_member(f"{key}.doclens", doclens)
        meta_bytes = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
        meta_offset = add_member(f"{key}.json", meta_bytes)
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

    index_bytes = encode_index(
        np.array(records, dtype=INDEX_RECORD_DTYPE),
        np.concatenate(all_doclens) if all_doclens else np.zeros(0, "<i4"),
        itemsize=dtype.itemsize,
        seq_len=seq_len,
        vocab_size=vocab_size,
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
) -> bytes:
    header = _INDEX_HEADER.pack(
        INDEX_MAGIC, FORMAT_VERSION, itemsize, seq_len, flags, vocab_size, len(records)
    )
    body = header + records.astype(INDEX_RECORD_DTYPE).tobytes() + doclens.astype("<i4").tobytes()
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
    doclens = np.frombuffer(buf[end:-8], dtype="<i4")
    raw = buf[start:end].cast("B")
    words = raw.cast("Q") if sys.byteorder == "little" else np.frombuffer(raw, "<u8")
    return RowIndex(records, doclens, itemsize, seq_len, vocab_size, words, raw, buf[end:-8].cast("B"), flags)


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
    return PackedRow(np.frombuffer(payload, dtype=dtype).copy(), doc_lens.tolist(), meta.get("doc_ids", []))
