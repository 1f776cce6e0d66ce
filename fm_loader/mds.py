"""MosaicML MDS datasets as loader sources, read in place (no conversion).

An MDS folder holds ``index.json`` (``version: 2``, a list of shards with ``column_names``,
``column_encodings``, ``column_sizes``, ``samples``, ``raw_data`` and, when compressed, ``zip_data``) and
shard files. A raw shard is ``uint32 num_samples``, ``uint32 offsets[num_samples + 1]`` (absolute), then
samples; a sample is the uint32 sizes of its variable-size columns followed by each column's bytes.

* :class:`MDSTokenSource` - a pre-tokenized column (``ndarray[:dtype[:shape]]``, or ``bytes`` plus a
  ``dtype`` in the mixture). Each sample is one row; ``eos_token_id`` (optional) splits it into documents.
* :class:`MDSTextSource` - a ``str`` column tokenized with a ``tokenizers`` JSON file and packed next-fit
  into rows of ``seq_len`` on the fly. Packing happens per MDS shard, so the row counts are known once each
  shard has been packed; they are memoised next to the cache so later starts are quick. Deterministic and
  resumable (the stream math is the same), but the first start tokenizes every shard once.

MDS has no per-row checksum; shard hashes listed in ``index.json`` (sha1, sha256, md5, xxh64, xxh3_64)
are verified when a shard is opened.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any

import numpy as np
import xxhash

from fm_loader.sources import CorruptRowError, ReadResult, ShardRows, Source
from fm_loader.storage import ShardCache, read_bytes, write_bytes_atomic

logger = logging.getLogger(__name__)

_NDARRAY_DTYPES = {
    8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 32: "uint32", 33: "int32", 64: "uint64", 65: "int64",
}  # fmt: skip
_SHAPE_DTYPES = {0: "uint8", 1: "uint16", 2: "uint32", 3: "uint64"}
_HASHERS = {
    "sha1": lambda b: hashlib.sha1(b).hexdigest(),
    "sha256": lambda b: hashlib.sha256(b).hexdigest(),
    "md5": lambda b: hashlib.md5(b).hexdigest(),
    "xxh64": lambda b: xxhash.xxh64_hexdigest(b),
    "xxh3_64": lambda b: xxhash.xxh3_64_hexdigest(b),
}


def decode_ndarray(encoding: str, data: bytes | memoryview, fallback_dtype: str | None = None) -> np.ndarray:
    """Decode an MDS ``ndarray`` / ``bytes`` column value to a 1-D integer array."""
    parts = encoding.split(":")
    if parts[0] == "bytes":
        if not fallback_dtype:
            raise ValueError("a 'bytes' token column needs 'dtype' in the mixture entry")
        return np.frombuffer(data, dtype=fallback_dtype)
    if parts[0] != "ndarray":
        raise ValueError(f"unsupported MDS token column encoding {encoding!r}")
    buf = memoryview(data)
    pos = 0
    if len(parts) >= 2 and parts[1]:
        dtype = parts[1]
    else:
        dtype = _NDARRAY_DTYPES[buf[0]]
        pos = 1
    if len(parts) < 3:  # dynamic shape: [ndim << 2 | shape dtype] [shape] [values]
        ndim, shape_dtype = buf[pos] >> 2, _SHAPE_DTYPES[buf[pos] & 3]
        pos += 1 + ndim * np.dtype(shape_dtype).itemsize
    return np.frombuffer(buf[pos:], dtype=dtype).reshape(-1)


class _MDSIndex:
    def __init__(self, uri: str, cache: ShardCache) -> None:
        self.uri = uri.rstrip("/")
        self.cache = cache
        index_uri = self.uri + "/index.json"
        self.raw_index = read_bytes(cache.get(index_uri))
        doc = json.loads(self.raw_index)
        if doc.get("version") != 2:
            raise ValueError(f"{index_uri}: unsupported MDS index version {doc.get('version')}")
        self.shards: list[dict[str, Any]] = doc["shards"]
        for shard in self.shards:
            if shard.get("format") != "mds":
                raise ValueError(f"{index_uri}: only MDS shards are supported, got {shard.get('format')}")

    def shard_bytes(self, shard: int) -> bytes:
        """Raw (decompressed) bytes of a shard, verified against the hashes in the index."""
        info = self.shards[shard]
        zipped = info.get("zip_data")
        if zipped:
            data = read_bytes(self.cache.get(f"{self.uri}/{zipped['basename']}"))
            self._verify(zipped, data, shard)
            algo = (info.get("compression") or "zstd").split(":")[0]
            if algo != "zstd":
                raise ValueError(f"MDS compression {algo!r} is not supported (only zstd)")
            import zstandard

            data = zstandard.ZstdDecompressor().decompress(data, max_output_size=info["raw_data"]["bytes"])
        else:
            data = read_bytes(self.cache.get(f"{self.uri}/{info['raw_data']['basename']}"))
        self._verify(info["raw_data"], data, shard)
        return data

    def _verify(self, file_info: dict[str, Any], data: bytes, shard: int) -> None:
        for algo, want in (file_info.get("hashes") or {}).items():
            hasher = _HASHERS.get(algo)
            if hasher is not None and hasher(data) != want:
                raise CorruptRowError(f"{self.uri}/{file_info['basename']}", -1, f"{algo} mismatch")
        if file_info.get("bytes") is not None and len(data) != file_info["bytes"]:
            raise CorruptRowError(f"{self.uri}/{file_info['basename']}", -1, "size differs from index.json")


def _column(info: dict[str, Any], name: str) -> tuple[int, list[int | None]]:
    names = info["column_names"]
    if name not in names:
        raise ValueError(f"MDS column {name!r} not found (columns: {names})")
    return names.index(name), info["column_sizes"]


def _sample_column(data: memoryview, begin: int, end: int, col: int, sizes: list[int | None]) -> memoryview:
    pos = begin
    lengths = []
    for size in sizes:
        if size:
            lengths.append(size)
        else:
            lengths.append(int.from_bytes(data[pos : pos + 4], "little"))
            pos += 4
    start = pos + sum(lengths[:col])
    return data[start : start + lengths[col]]


def _samples(raw: bytes) -> tuple[memoryview, np.ndarray]:
    view = memoryview(raw)
    count = int.from_bytes(view[:4], "little")
    offsets = np.frombuffer(view[4 : 4 + 4 * (count + 1)], dtype="<u4").astype(np.int64)
    return view, offsets


class _PackedShard(ShardRows):
    """Rows held in memory: flat tokens plus per-row offsets and document lengths."""

    def __init__(self, tokens: np.ndarray, row_starts: np.ndarray, docs: list[np.ndarray], itemsize: int):
        self.tokens, self.row_starts, self.docs, self.itemsize = tokens, row_starts, docs, itemsize

    def read(
        self, rows: np.ndarray, out: np.ndarray, slots: np.ndarray, skip_corrupt: bool = False
    ) -> ReadResult:
        lengths = (self.row_starts[rows + 1] - self.row_starts[rows]).tolist()
        for slot, r, n in zip(slots.tolist(), rows.tolist(), lengths, strict=True):
            start = int(self.row_starts[r])
            out[slot, :n] = self.tokens[start : start + n]
        return ReadResult(lengths, [self.docs[r] for r in rows.tolist()], sum(lengths) * self.itemsize, [])


class MDSTokenSource(Source):
    """A pre-tokenized MDS dataset. By default every sample is one row (at most ``seq_len`` tokens); with
    ``pack: true`` every sample is a whole document, packed into rows like the text path (next-fit within a
    shard: documents kept whole unless longer than a row, then split; row counts computed once at start from
    the shards and cached, so the stream is known before the first batch and the same on every rank)."""

    def __init__(self, uri: str, options: dict[str, Any], cache: ShardCache | None = None) -> None:
        self.cache = cache or ShardCache()
        self.index = _MDSIndex(uri, self.cache)
        self.name = options.get("name") or uri.rstrip("/").rsplit("/", 1)[-1]
        self.namespace = str(options.get("namespace", "cloud"))  # MDS has no manifest: the mixture entry says
        self.origin = f"mds {uri}"
        self.column = options.get("column", "tokens")
        self.dtype = options.get("dtype")
        self.seq_len = int(options["seq_len"])
        self.vocab_size = int(options["vocab_size"])
        self.tokenizer_hash = str(options.get("tokenizer_hash", ""))
        self.eos = options.get("eos_token_id")
        self.pack = bool(options.get("pack", False))
        self.max_docs_per_row = 0 if self.eos is not None or self.pack else 1
        if self.pack:
            self._counts_path = os.path.join(
                self.cache.folder,
                "mds-token-rows",
                hashlib.sha256(self._key().encode()).hexdigest()[:24] + ".json",
            )
            self.shard_rows = self._packed_row_counts()
        else:
            self.shard_rows = np.array([s["samples"] for s in self.index.shards], dtype=np.int64)

    def _key(self) -> str:
        return f"{hashlib.sha256(self.index.raw_index).hexdigest()}|{self.column}|{self.dtype}|{self.seq_len}|pack"

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self.index.raw_index)
        h.update(
            f"|{self.column}|{self.dtype}|{self.seq_len}|{self.eos}{'|pack' if self.pack else ''}".encode()
        )
        return h.hexdigest()[:16]

    def shard_label(self, shard: int) -> str:
        return f"{self.index.uri}/{self.index.shards[shard]['raw_data']['basename']}"

    def _samples(self, shard: int) -> list[np.ndarray]:
        info = self.index.shards[shard]
        col, sizes = _column(info, self.column)
        encoding = info["column_encodings"][col]
        view, offsets = _samples(self.index.shard_bytes(shard))
        return [
            decode_ndarray(
                encoding, _sample_column(view, int(offsets[i]), int(offsets[i + 1]), col, sizes), self.dtype
            )
            for i in range(len(offsets) - 1)
        ]

    def _packed_row_counts(self) -> np.ndarray:
        if os.path.exists(self._counts_path):
            with open(self._counts_path) as f:
                return np.asarray(json.load(f), dtype=np.int64)
        counts = [
            len(pack_next_fit(self._samples(i), self.seq_len)[1]) - 1 for i in range(len(self.index.shards))
        ]
        write_bytes_atomic(self._counts_path, json.dumps(counts).encode())
        return np.asarray(counts, dtype=np.int64)

    def open_shard(self, shard: int) -> ShardRows:
        arrays = self._samples(shard)
        if self.pack:
            tokens, starts, docs = pack_next_fit(arrays, self.seq_len)
            if len(starts) - 1 != self.shard_rows[shard]:
                raise CorruptRowError(
                    self.shard_label(shard), -1, "packing is not reproducible (row count changed)"
                )
            return _PackedShard(tokens, starts, docs, tokens.dtype.itemsize)
        docs = []
        for i, arr in enumerate(arrays):
            if len(arr) > self.seq_len:
                raise CorruptRowError(
                    self.shard_label(shard),
                    i,
                    f"{len(arr)} tokens > seq_len {self.seq_len}; if this column holds whole documents, add "
                    "'pack: true' to the source so they are packed into rows",
                )
            docs.append(_split_at_eos(arr, self.eos))
        tokens = np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
        starts = np.concatenate([[0], np.cumsum([len(a) for a in arrays])]).astype(np.int64)
        return _PackedShard(tokens, starts, docs, tokens.dtype.itemsize)


def _split_at_eos(arr: np.ndarray, eos: int | None) -> np.ndarray:
    if eos is None or len(arr) == 0:
        return np.array([len(arr)] if len(arr) else [], dtype=np.int32)
    ends = np.flatnonzero(arr == eos) + 1
    if len(ends) == 0 or ends[-1] != len(arr):
        ends = np.append(ends, len(arr))
    return np.diff(np.concatenate([[0], ends])).astype(np.int32)


def pack_next_fit(docs: list[np.ndarray], seq_len: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Greedy next-fit packing: documents in order, a document that does not fit opens a new row, a
    document longer than ``seq_len`` is split. Returns flat tokens, row starts and per-row doc lengths."""
    rows_docs: list[list[int]] = [[]]
    used = 0
    pieces: list[np.ndarray] = []
    for doc in docs:
        pos = 0
        while pos < len(doc):
            room = seq_len - used
            take = min(room, len(doc) - pos)
            if take < len(doc) - pos and used > 0 and len(doc) - pos <= seq_len:
                rows_docs.append([])  # it would fit whole in a fresh row: do not split it
                used = 0
                continue
            pieces.append(doc[pos : pos + take])
            rows_docs[-1].append(take)
            used += take
            pos += take
            if used == seq_len:
                rows_docs.append([])
                used = 0
    if not rows_docs[-1]:
        rows_docs.pop()
    tokens = np.concatenate(pieces) if pieces else np.zeros(0, np.uint32)
    lens = [sum(r) for r in rows_docs]
    starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return tokens, starts, [np.asarray(r, dtype=np.int32) for r in rows_docs]


class MDSTextSource(Source):
    """An MDS dataset of text; tokenized and packed into rows when a shard is opened."""

    def __init__(
        self, uri: str, options: dict[str, Any], tokenizer_path: str, cache: ShardCache | None = None
    ):
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(
                "MDS text sources tokenize with the 'tokenizers' package: "
                "pip install 'fm-data-platform[mds-text]'"
            ) from exc

        self.cache = cache or ShardCache()
        self.index = _MDSIndex(uri, self.cache)
        self.name = options.get("name") or uri.rstrip("/").rsplit("/", 1)[-1]
        self.namespace = str(options.get("namespace", "cloud"))  # MDS has no manifest: the mixture entry says
        self.origin = f"mds {uri}"
        self.column = options.get("text_column", "text")
        self.seq_len = int(options["seq_len"])
        tok_bytes = read_bytes(self.cache.get(tokenizer_path))
        self.tokenizer = Tokenizer.from_str(tok_bytes.decode())
        self.tokenizer_hash = str(options.get("tokenizer_hash") or hashlib.sha256(tok_bytes).hexdigest()[:16])
        self.vocab_size = int(options.get("vocab_size") or self.tokenizer.get_vocab_size())
        self.eos = options.get("eos_token_id")
        self.max_docs_per_row = 0
        self._counts_path = os.path.join(
            self.cache.folder,
            "mds-text-rows",
            hashlib.sha256(self._key().encode()).hexdigest()[:24] + ".json",
        )
        self.shard_rows = self._row_counts()

    def _key(self) -> str:
        return f"{hashlib.sha256(self.index.raw_index).hexdigest()}|{self.column}|{self.seq_len}|{self.tokenizer_hash}|{self.eos}"

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self._key().encode()).hexdigest()[:16]

    def _row_counts(self) -> np.ndarray:
        if os.path.exists(self._counts_path):
            with open(self._counts_path) as f:
                return np.asarray(json.load(f), dtype=np.int64)
        counts = [len(self._pack(i)[1]) - 1 for i in range(len(self.index.shards))]
        write_bytes_atomic(self._counts_path, json.dumps(counts).encode())
        return np.asarray(counts, dtype=np.int64)

    def _pack(self, shard: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        info = self.index.shards[shard]
        col, sizes = _column(info, self.column)
        view, offsets = _samples(self.index.shard_bytes(shard))
        texts = [
            bytes(_sample_column(view, int(offsets[i]), int(offsets[i + 1]), col, sizes)).decode("utf-8")
            for i in range(len(offsets) - 1)
        ]
        dtype = np.uint16 if self.vocab_size < 65536 else np.uint32
        docs = []
        for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False):
            ids = enc.ids + ([int(self.eos)] if self.eos is not None else [])
            if ids:
                docs.append(np.asarray(ids, dtype=dtype))
        return pack_next_fit(docs, self.seq_len)

    def shard_label(self, shard: int) -> str:
        return f"{self.index.uri}/{self.index.shards[shard]['raw_data']['basename']}"

    def open_shard(self, shard: int) -> ShardRows:
        tokens, starts, docs = self._pack(shard)
        if len(starts) - 1 != self.shard_rows[shard]:
            raise CorruptRowError(
                self.shard_label(shard), -1, "packing is not reproducible (row count changed)"
            )
        return _PackedShard(tokens, starts, docs, tokens.dtype.itemsize)


__all__ = ["MDSTextSource", "MDSTokenSource", "decode_ndarray", "pack_next_fit"]
