"""Reading a batch's rows out of open shards: :class:`BatchAssembler`.

A batch of ``B`` rows usually touches dozens of shards with a row or two each, so grouping rows by shard buys
little and per-row Python work dominates. The gather instead works on whole batches with a handful of C-level
passes, none of which runs Python bytecode per row:

1. the rows' 56-byte index records are sliced out of their shards' ``.idx`` bytes and joined into one
   structured array (``map(getitem, views, map(slice, ...))`` + ``bytes.join``), which gives every row's token
   offset, length, checksum and document range as numpy columns;
2. the token payloads are sliced out of the memory-mapped tars the same way; their xxh3-64 checksums are
   taken in one ``map`` and compared with the index's as one list;
3. one ``bytes.join`` of the payloads, each followed by a slice of a zero buffer that pads it to ``T``,
   gives the zero-padded ``(rows, T)`` token matrix, copied into ``input_ids`` with one dtype conversion (per
   chunk of :data:`~fm_loader.batching.CHUNK_TOKENS` tokens); the document lengths are joined the same way.

The checksum guarantee is the per-row one: a row whose checksum fails is read again from the file, bypassing
the memory map, and only if the fresh bytes fail too is it reported (:class:`CorruptRowError` with the shard
and row) or, with ``skip_corrupt``, turned into a padding row.

Rows of other sources (MDS) and of tar shards with another token width are read by their
:class:`~fm_loader.sources.ShardRows` afterwards, into the same buffer.

Per-token ``extra_columns`` (:mod:`fm_loader.columns`) are filled with their declared value first, then the
rows of shards that store a column get their values copied in, row by row (checked like the tokens).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from itertools import repeat
from operator import getitem
from typing import NamedTuple, cast

import numpy as np
import torch
import xxhash

from fm_loader.batching import BufferPool, chunk_rows, fill_batch, numpy_id_dtype
from fm_loader.columns import copy_row_columns
from fm_loader.format import INDEX_RECORD_DTYPE
from fm_loader.mixture import Mixture
from fm_loader.sources import CorruptRowError, CorruptShardError, ShardRows, TarShardRows
from fm_loader.stream import RowRefs

logger = logging.getLogger(__name__)

KEY_SHIFT = 40
"""An open shard's key is ``source << KEY_SHIFT | shard``."""
PAD_KEY = -(1 << KEY_SHIFT)
"""The key of padding rows (``source == -1``, ``shard == 0``)."""
_RECORD_SIZE = INDEX_RECORD_DTYPE.itemsize
_NO_DOCS = np.zeros(0, np.int32)
_NO_SLOTS = np.zeros(0, np.int64)


def _distinct(keys: Iterable[int]) -> dict[int, None]:
    """The shard keys of ``keys`` once each, in order (padding rows need no shard)."""
    distinct = dict.fromkeys(keys)
    distinct.pop(PAD_KEY, None)
    return distinct


class _Views(NamedTuple):
    """What the gather slices for one open shard (byte memoryviews)."""

    records: memoryview  # the index records
    tokens: memoryview  # the tar
    doclens: memoryview  # the index's int32 document lengths


def _null_views() -> _Views:
    """Views that read as one empty row (no tokens, no documents, the checksum of no bytes)."""
    record = np.zeros(1, INDEX_RECORD_DTYPE)
    record["tokens_checksum"] = xxhash.xxh3_64_intdigest(b"")
    return _Views(memoryview(record.tobytes()), memoryview(b""), memoryview(b""))


_NULL = _null_views()


class _Gathered(NamedTuple):
    lengths: np.ndarray  # int64 tokens per row (0: padding, other source, skipped corrupt row)
    n_docs: np.ndarray  # int64 documents per row
    doclens: bytes  # int32 document lengths of the rows, in row order


class BatchAssembler:
    """Reads the rows named by :class:`~fm_loader.stream.RowRefs` from their shards into a batch.

    Shards stay open (memory maps and decoded indexes) in a least-recently-used set of at most ``max_open``;
    a batch that touches more shards than that is gathered in consecutive pieces that each fit.

    Attributes:
        seq_len: Row length ``T``.
        max_docs: Documents per row the batch has room for.
        skip_corrupt: Turn rows that fail their checksum twice into padding rows instead of raising.
        max_open: Most shards held open at once (may be changed between batches).
        corrupt_rows_skipped: Rows turned into padding because they were corrupt or their shard is missing.
        lost_rows: The part of ``corrupt_rows_skipped`` whose shard or row index could not be opened.
        last_counts: Real tokens and real (non-padding) rows of the last batch assembled.
    """

    def __init__(
        self,
        mixture: Mixture,
        seq_len: int,
        max_docs: int,
        skip_corrupt: bool,
        max_open: int = 256,
        input_ids_dtype: torch.dtype = torch.int32,
        pooled_batches: int = 4,
        extra_columns: dict[str, int] | None = None,
    ) -> None:
        """Plan the gather; no shard is opened.

        Args:
            mixture: The sources, indexed by ``RowRefs.source``.
            seq_len: Row length ``T``.
            max_docs: Documents per row the batch has room for (``cu_seqlens`` is ``(B, max_docs + 1)``).
            skip_corrupt: Turn rows that fail their checksum twice into padding rows instead of raising
                :class:`~fm_loader.sources.CorruptRowError`.
            max_open: Most shards held open at once.
            input_ids_dtype: ``torch.int32`` or ``torch.int64``.
            pooled_batches: Output buffer sets kept for reuse per batch shape.
            extra_columns: Per-token column name -> fill value (see :mod:`fm_loader.columns`).
        """
        self.mixture = mixture
        self.seq_len = seq_len
        self.max_docs = max_docs
        self.skip_corrupt = skip_corrupt
        self.max_open = max_open
        self.corrupt_rows_skipped = 0
        self.lost_rows = 0
        self.lost_shards: dict[int, str] = {}  # shards that could not be opened (skip_corrupt): key -> why
        self.last_counts: tuple[int, int] = (0, 0)  # (real tokens, real rows) of the last batch assembled
        self._id_dtype = numpy_id_dtype(input_ids_dtype)
        self._pooled_batches = pooled_batches
        self._pools: dict[int, BufferPool] = {}
        self.extra_columns = dict(extra_columns or {})
        # Rows are gathered with the token width of the first manifest source; tar shards of another width and
        # other kinds of source are read by their ShardRows.read.
        widths = [s.tar_token_dtype for s in mixture.sources]
        self._dtype = next((w for w in widths if w is not None), np.dtype("<u2"))
        self._itemsize = self._dtype.itemsize
        # Indexed by source + 1 (padding rows have source -1): True where the gather reads the source's rows.
        self._gathered = np.array([True] + [w == self._dtype for w in widths], dtype=bool)
        self._all_gathered = bool(self._gathered.all())
        self._zeros = memoryview(bytes(seq_len * self._itemsize))
        self._open: dict[int, ShardRows] = {}
        self._views: dict[int, _Views] = {PAD_KEY: _NULL}
        self._last_used: dict[int, int] = {}
        self._tick = 0

    # -- open shards ---------------------------------------------------------------------------------------
    def _open_shard(self, key: int) -> None:
        reader = self.mixture.sources[key >> KEY_SHIFT].open_shard(key & ((1 << KEY_SHIFT) - 1))
        if not self._gathered[(key >> KEY_SHIFT) + 1]:
            self._views[key] = _NULL
        elif isinstance(reader, TarShardRows) and reader.itemsize == self._itemsize:
            self._views[key] = _Views(reader.record_bytes, reader.token_bytes, reader.doclens_bytes)
        else:
            reader.close()
            label = self.mixture.sources[key >> KEY_SHIFT].shard_label(key & ((1 << KEY_SHIFT) - 1))
            raise CorruptRowError(label, -1, "token width of the row index differs from the manifest's")
        self._open[key] = reader

    def _close_shard(self, key: int) -> None:
        self._views.pop(key, None)
        self._last_used.pop(key, None)
        self._open.pop(key).close()

    def _ensure_open(self, keys: Iterable[int], distinct: dict[int, None] | None = None) -> None:
        """Open the shards of ``keys`` that are not open, mark them used, and close the least recently used
        shards beyond ``max_open`` (never one of ``keys``); ``distinct``: the keys once each, if known."""
        if distinct is None:
            distinct = _distinct(keys)
        views = self._views
        for key in distinct:
            if key not in views:
                self._open_shard(key)
        self._tick += 1
        self._last_used.update(dict.fromkeys(distinct, self._tick))
        excess = len(self._open) - self.max_open
        if excess > 0:
            by_age = sorted(self._open, key=self._last_used.__getitem__)
            for key in [k for k in by_age if k not in distinct][:excess]:
                self._close_shard(key)

    def _without_lost_shards(self, refs: RowRefs) -> RowRefs:
        """``refs`` with the rows of shards that cannot be opened turned into padding (``skip_corrupt``): each
        such shard is logged once and its rows counted in ``lost_rows`` and ``corrupt_rows_skipped``."""
        keys = (refs.source << KEY_SHIFT) | refs.shard
        for key in _distinct(keys.tolist()):
            if key in self._views or key in self.lost_shards:
                continue
            try:
                self._open_shard(key)
                self._last_used[key] = self._tick
            except CorruptShardError as exc:
                logger.warning("skipping every row of %s", exc)
                self.lost_shards[key] = str(exc)
        if not self.lost_shards:
            return refs
        lost = np.isin(keys, np.fromiter(self.lost_shards, np.int64)) & (refs.source >= 0)
        if not lost.any():
            return refs
        self.corrupt_rows_skipped += int(lost.sum())
        self.lost_rows += int(lost.sum())
        keep = ~lost
        return RowRefs(
            np.where(keep, refs.source, -1),
            np.where(keep, refs.shard, 0),
            np.where(keep, refs.row, 0),
            np.where(keep, refs.sample_id, -1),
        )

    def _reader(self, key: int) -> ShardRows:
        self._ensure_open((key,))
        return self._open[key]

    def prefetch(self, refs: RowRefs) -> None:
        """Open (and for remote sources download) every shard ``refs`` touches.

        Args:
            refs: Rows of a coming batch.
        """
        if self.skip_corrupt:
            refs = self._without_lost_shards(refs)
        keys = ((refs.source << KEY_SHIFT) | refs.shard).tolist()
        distinct = _distinct(keys)
        if len(distinct) <= self.max_open:
            self._ensure_open(keys, distinct)
            return
        for lo, hi in self._pieces(keys):
            self._ensure_open(keys[lo:hi])

    def _pieces(self, keys: list[int]) -> list[tuple[int, int]]:
        """Consecutive slot ranges that each touch at most ``max_open`` shards."""
        pieces, seen, lo = [], set(), 0
        for slot, key in enumerate(keys):
            if key != PAD_KEY and key not in seen:
                if len(seen) >= max(1, self.max_open):
                    pieces.append((lo, slot))
                    seen, lo = set(), slot
                seen.add(key)
        pieces.append((lo, len(keys)))
        return pieces

    # -- the gather ----------------------------------------------------------------------------------------
    def _gather(
        self,
        keys: list[int],
        rows: np.ndarray,
        ids: np.ndarray,
        first_slot: int,
        sample_ids: np.ndarray,
        distinct: dict[int, None] | None = None,
        columns: dict[str, np.ndarray] | None = None,
    ) -> _Gathered:
        """Copy rows ``rows`` of shards ``keys`` into ``ids[first_slot:]`` (zero padded); their lengths and
        document lengths."""
        self._ensure_open(keys, distinct)
        isz = self._itemsize
        rec_views, tok_views, doc_views = zip(*map(self._views.__getitem__, keys), strict=True)
        starts = rows * _RECORD_SIZE
        records = np.frombuffer(
            b"".join(map(getitem, rec_views, map(slice, starts.tolist(), (starts + _RECORD_SIZE).tolist()))),
            INDEX_RECORD_DTYPE,
        )
        lengths = records["n_tokens"].astype(np.int64)
        n_docs = records["n_docs"].astype(np.int64)
        offsets = records["tokens_offset"].astype(np.int64)
        chunks: list[bytes | memoryview] = list(
            map(getitem, tok_views, map(slice, offsets.tolist(), (offsets + lengths * isz).tolist()))
        )
        want = records["tokens_checksum"].tolist()
        got = list(map(xxhash.xxh3_64_intdigest, chunks))
        if got != want:
            self._recheck(got, want, chunks, keys, rows, offsets, lengths, n_docs, sample_ids[first_slot:])
        if lengths.min(initial=self.seq_len) < self.seq_len:  # pad short rows with zeros up to seq_len
            parts: list[bytes | memoryview] = [b""] * (2 * len(chunks))
            parts[0::2] = chunks
            pads = ((self.seq_len - lengths) * isz).tolist()
            parts[1::2] = cast("Iterator[memoryview]", map(getitem, repeat(self._zeros), map(slice, pads)))
            step = 2
        else:
            parts, step = chunks, 1
        # One bytes.join per chunk of rows gives them as a zero-padded (rows, T) matrix, copied into input_ids
        # with one dtype conversion (in chunks: a big temporary would be page-faulted afresh every batch).
        rows_per_chunk = chunk_rows(self.seq_len)
        for lo in range(0, len(chunks), rows_per_chunk):
            hi = min(len(chunks), lo + rows_per_chunk)
            staged = np.frombuffer(b"".join(parts[lo * step : hi * step]), self._dtype)
            np.copyto(ids[first_slot + lo : first_slot + hi], staged.reshape(hi - lo, -1), casting="unsafe")
        doc_starts = records["doc_start"].astype(np.int64) * 4
        doclens = b"".join(
            map(getitem, doc_views, map(slice, doc_starts.tolist(), (doc_starts + n_docs * 4).tolist()))
        )
        if columns:  # while this piece's shards are open
            for j, (key, row, n) in enumerate(zip(keys, rows.tolist(), lengths.tolist(), strict=True)):
                reader = self._open.get(key) if n else None
                if isinstance(reader, TarShardRows):
                    copy_row_columns(reader, row, first_slot + j, n, columns, self.skip_corrupt)
        return _Gathered(lengths, n_docs, doclens)

    def _recheck(
        self,
        got: list[int],
        want: list[int],
        chunks: list[bytes | memoryview],
        keys: list[int],
        rows: np.ndarray,
        offsets: np.ndarray,
        lengths: np.ndarray,
        n_docs: np.ndarray,
        sample_ids: np.ndarray,
    ) -> None:
        """Re-read from the file every row whose checksum failed; a row that fails again is reported with its
        shard and row (or, with ``skip_corrupt``, becomes a padding row)."""
        isz = self._itemsize
        for j in [j for j, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]:
            reader = self._open[keys[j]]
            assert isinstance(reader, TarShardRows)
            fresh = reader.reread(int(offsets[j]), int(lengths[j]) * isz)
            if xxhash.xxh3_64_intdigest(fresh) == want[j]:
                chunks[j] = fresh  # the page cache or the map was bad, the file is good
                continue
            row = int(rows[j])
            if not self.skip_corrupt:
                chunks.clear()  # no slice of the map outlives the error (the shard must stay closable)
                raise CorruptRowError(reader.label, row)
            logger.warning("skipping corrupt row %d of %s", row, reader.label)
            self.corrupt_rows_skipped += 1
            chunks[j] = b""
            lengths[j] = n_docs[j] = 0
            sample_ids[j] = -1

    def _pool(self, count: int) -> BufferPool:
        pool = self._pools.get(count)
        if pool is None:
            pool = BufferPool(
                count,
                self.seq_len,
                self.max_docs,
                self._id_dtype,
                self._pooled_batches,
                tuple(self.extra_columns),
            )
            self._pools[count] = pool
        return pool

    def assemble(self, refs: RowRefs) -> dict[str, torch.Tensor]:
        """Build the batch of the rows ``refs`` names (fields and shapes in :mod:`fm_loader.batching`).

        Args:
            refs: One row reference per slot; ``source == -1`` makes a padding row.

        Returns:
            The batch, as a dict of tensors.

        Raises:
            CorruptRowError: A row failed its checksum twice and ``skip_corrupt`` is off, or a shard's index
                does not match the manifest.
        """
        if self.skip_corrupt:
            refs = self._without_lost_shards(refs)
        count = len(refs.source)
        out = self._pool(count).acquire()
        keys = ((refs.source << KEY_SHIFT) | refs.shard).tolist()
        rows = refs.row
        sample_ids = refs.sample_id.copy()
        others = _NO_SLOTS if self._all_gathered else np.flatnonzero(~self._gathered[refs.source + 1])
        if len(others):
            rows = rows.copy()
            rows[others] = 0  # the gather reads the null row there; ShardRows.read fills them in afterwards
        ids = out["input_ids"]
        columns = {name: out[name] for name in self.extra_columns}
        for name, fill in self.extra_columns.items():
            columns[name].fill(fill)
        distinct = _distinct(keys)
        if len(distinct) <= self.max_open:
            pieces = [self._gather(keys, rows, ids, 0, sample_ids, distinct, columns)]
        else:
            pieces = [
                self._gather(keys[lo:hi], rows[lo:hi], ids, lo, sample_ids, columns=columns)
                for lo, hi in self._pieces(keys)
            ]
        if len(pieces) == 1:
            lengths, n_docs, doclens = pieces[0]
        else:
            lengths = np.concatenate([p.lengths for p in pieces])
            n_docs = np.concatenate([p.n_docs for p in pieces])
            doclens = b"".join(p.doclens for p in pieces)
        flat_docs = np.frombuffer(doclens, "<i4")
        if len(others):
            flat_docs = self._read_others(
                refs, keys, others.tolist(), ids, lengths, n_docs, flat_docs, sample_ids, columns
            )
        batch = fill_batch(out, lengths, n_docs, flat_docs, sample_ids, tails_zeroed=True)
        for name, array in columns.items():
            batch[name] = torch.from_numpy(array)
        self.last_counts = (int(lengths.sum()), count - int(np.count_nonzero(sample_ids < 0)))
        return batch

    def _read_others(
        self,
        refs: RowRefs,
        keys: list[int],
        slots: list[int],
        ids: np.ndarray,
        lengths: np.ndarray,
        n_docs: np.ndarray,
        flat_docs: np.ndarray,
        sample_ids: np.ndarray,
        columns: dict[str, np.ndarray],
    ) -> np.ndarray:
        """Read the rows of ``slots`` with their shards' ``ShardRows.read``; returns the merged doclens."""
        per_slot = np.split(flat_docs, np.cumsum(n_docs)[:-1]) if len(n_docs) else []
        by_key: dict[int, list[int]] = {}
        for slot in slots:
            by_key.setdefault(keys[slot], []).append(slot)
        for key, key_slots in by_key.items():
            slot_arr = np.asarray(key_slots, dtype=np.int64)
            reader = self._reader(key)
            result = reader.read(refs.row[slot_arr], ids, slot_arr, self.skip_corrupt)
            for slot, n, docs in zip(key_slots, result.lengths, result.doclens, strict=True):
                lengths[slot], n_docs[slot], per_slot[slot] = n, len(docs), docs
                if columns and n and isinstance(reader, TarShardRows):
                    row = int(refs.row[slot])
                    copy_row_columns(reader, row, slot, n, columns, self.skip_corrupt)
            if result.corrupt_rows:
                self.corrupt_rows_skipped += len(result.corrupt_rows)
                sample_ids[slot_arr[np.asarray(result.lengths) == 0]] = -1
        return np.concatenate([np.asarray(d, np.int32) for d in per_slot]) if per_slot else _NO_DOCS

    def close(self) -> None:
        """Close every open shard."""
        for key in list(self._open):
            self._close_shard(key)
