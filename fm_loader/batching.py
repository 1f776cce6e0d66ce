"""Turns raw packed rows (tokens + document lengths) into the fixed-shape training batch.

Every batch has the same keys, dtypes and shapes (``B`` rows of this rank, ``T = seq_len``,
``D = max_docs_per_row``):

=================== ============ ==========================================================================
key                 shape/dtype  meaning
=================== ============ ==========================================================================
input_ids           (B, T) int32 token ids, 0 on padding (int64 with ``input_ids_dtype=torch.int64``)
labels              (B, T) int64 next token inside the same document, else -100 (document ends, padding)
loss_mask           (B, T) bool  ``labels != -100``
position_ids        (B, T) int32 position inside the token's document (resets per document), 0 on padding
segment_ids         (B, T) int32 1-based document index inside the row, 0 on padding
cu_seqlens          (B, D+1) i32 cumulative document lengths per row, padded by repeating the row length
num_docs            (B,) int32   number of valid entries in ``cu_seqlens`` minus one
valid_token_count   (B,) int32   real (non-padding) tokens per row
sample_ids          (B,) int64   global row id (source << 48 | row inside the source), -1 for a padding row
=================== ============ ==========================================================================

``input_ids`` is int32 by default: ``torch.nn.Embedding`` takes it as is and it halves the bytes written;
``labels`` stays int64 because ``cross_entropy`` needs it.

Derived fields are computed for the whole batch at once from the document lengths: every row is cut into
segments (its documents, plus one padding segment when it is short), and ``np.repeat`` over the segment
lengths writes segment ids and segment starts for all ``B*T`` positions in one pass each. No per-token
Python work, and no per-row work except zeroing the tail of short rows.

Batches are written into buffers from a :class:`BufferPool`; a buffer set is reused only when nothing
outside the pool references its arrays any more (the tensors of earlier batches were dropped), which avoids
page-faulting fresh memory for every batch without ever overwriting a batch that is still in use.
"""

from __future__ import annotations

import sys
from functools import lru_cache

import numpy as np
import torch

IGNORE_INDEX = -100
"""``labels`` value where no loss is taken (document ends, padding); ``cross_entropy``'s default."""
SOURCE_SHIFT = 48
"""``sample_ids`` is ``source << SOURCE_SHIFT | row inside the source``."""

_ID_DTYPES = {torch.int32: np.int32, torch.int64: np.int64}


def numpy_id_dtype(dtype: torch.dtype) -> type[np.integer]:
    """The numpy dtype behind an ``input_ids`` torch dtype (int32 or int64)."""
    if dtype not in _ID_DTYPES:
        raise ValueError(f"input_ids_dtype must be torch.int32 or torch.int64, not {dtype}")
    return _ID_DTYPES[dtype]


class BufferPool:
    """Reusable output arrays for batches of one shape; a set is handed out again only once unreferenced."""

    def __init__(self, batch: int, seq_len: int, max_docs: int, id_dtype: type[np.integer], size: int = 4):
        self.shapes = {
            "input_ids": ((batch, seq_len), id_dtype),
            "labels": ((batch, seq_len), np.int64),
            "loss_mask": ((batch, seq_len), np.bool_),
            "position_ids": ((batch, seq_len), np.int32),
            "segment_ids": ((batch, seq_len), np.int32),
            "cu_seqlens": ((batch, max_docs + 1), np.int32),
            "num_docs": ((batch,), np.int32),
            "valid_token_count": ((batch,), np.int32),
            "sample_ids": ((batch,), np.int64),
        }
        self.size = size
        self._sets: list[tuple[dict[str, np.ndarray], tuple[int, ...]]] = []

    @staticmethod
    def _refcounts(arrays: dict[str, np.ndarray]) -> tuple[int, ...]:
        return tuple(sys.getrefcount(a) for a in arrays.values())

    def acquire(self) -> dict[str, np.ndarray]:
        for arrays, idle in self._sets:
            if self._refcounts(arrays) == idle:
                return arrays
        arrays = {key: np.empty(shape, dtype) for key, (shape, dtype) in self.shapes.items()}
        if len(self._sets) < self.size:
            self._sets.append((arrays, self._refcounts(arrays)))
        return arrays


@lru_cache(maxsize=8)
def _arange(count: int, dtype: type[np.integer] = np.int64) -> np.ndarray:
    """A read-only ``np.arange(count)``, shared by every batch of one shape."""
    positions = np.arange(count, dtype=dtype)
    positions.flags.writeable = False
    return positions


def _flat_positions(count: int) -> np.ndarray:
    return _arange(count, np.int32 if count < 2**31 else np.int64)


def fill_batch(
    out: dict[str, np.ndarray],
    lengths: np.ndarray,
    n_docs: np.ndarray,
    doclens: np.ndarray,
    sample_ids: np.ndarray,
    *,
    tails_zeroed: bool = False,
) -> dict[str, torch.Tensor]:
    """Complete ``out`` (from :meth:`BufferPool.acquire`) whose ``input_ids`` rows hold ``lengths`` tokens.

    Every row is cut into segments: its documents, then one padding segment when it is short. Laid end to end
    the segments cover the ``B*T`` flat positions exactly, so one cumulative sum gives every segment's flat
    start and end, and one ``np.repeat`` each writes ``segment_ids`` and ``position_ids`` for the whole batch.

    Args:
        out: Buffers from :meth:`BufferPool.acquire`; ``input_ids`` holds the rows' tokens.
        lengths: Tokens per row.
        n_docs: Documents per row.
        doclens: Every row's document lengths, concatenated in row order (``n_docs`` per row).
        sample_ids: Global row id per row, -1 for padding rows.
        tails_zeroed: ``input_ids`` is already 0 past each row's length (skips zeroing it again).

    Returns:
        The batch: a dict of tensors sharing memory with ``out``.

    Raises:
        ValueError: A row has more documents than ``cu_seqlens`` has room for, or its document lengths do not
            add up to its length.
    """
    ids = out["input_ids"]
    batch, seq_len = ids.shape
    max_docs = out["cu_seqlens"].shape[1] - 1
    lengths = np.asarray(lengths, dtype=np.int64)
    n_docs = np.asarray(n_docs, dtype=np.int64)
    doclens = np.asarray(doclens, dtype=np.int64)
    if n_docs.max(initial=0) > max_docs:
        raise ValueError(f"a row has {int(n_docs.max())} documents, more than max_docs_per_row={max_docs}")
    doc_row = np.repeat(_arange(batch), n_docs)
    if not np.array_equal(np.bincount(doc_row, weights=doclens, minlength=batch), lengths):
        raise ValueError("document lengths do not add up to the row lengths")
    doc_first = np.cumsum(n_docs)
    doc_first -= n_docs
    doc_k = _arange(len(doclens)) - doc_first[doc_row]  # 0-based index of each document inside its row
    short = np.flatnonzero(lengths < seq_len)
    seg_value = doc_k.astype(np.int32)
    seg_value += 1
    if len(short) == 0:  # full rows: the segments are the documents
        seg_len = doclens
        seg_end = np.cumsum(doclens)
        doc_end = seg_end
    else:  # a padding segment after the documents of each short row
        pads_before = np.cumsum(lengths < seq_len)
        doc_slot = _arange(len(doclens)) + pads_before[doc_row]
        doc_slot -= lengths[doc_row] < seq_len  # a row's own padding segment comes after its documents
        pad_slot = doc_first[short] + n_docs[short] + _arange(len(short))
        total = len(doclens) + len(short)
        seg_len = np.empty(total, np.int64)
        seg_len[doc_slot] = doclens
        seg_len[pad_slot] = seq_len - lengths[short]
        values = np.zeros(total, np.int32)
        values[doc_slot] = seg_value
        seg_value = values
        seg_end = np.cumsum(seg_len)
        doc_end = seg_end[doc_slot]
    flat_positions = _flat_positions(batch * seq_len)
    seg_start = seg_end.astype(flat_positions.dtype)
    seg_start -= seg_len.astype(flat_positions.dtype)

    segment_ids, position_ids = out["segment_ids"], out["position_ids"]
    np.copyto(segment_ids.reshape(-1), np.repeat(seg_value, seg_len))
    np.subtract(flat_positions, np.repeat(seg_start, seg_len), out=position_ids.reshape(-1), casting="unsafe")

    # loss_mask is written directly (1 byte a token) rather than read back from labels (8 bytes a token); it is
    # False exactly where labels get IGNORE_INDEX: the last column, each document's last token, padding.
    labels, loss_mask = out["labels"], out["loss_mask"]
    np.copyto(labels.reshape(-1)[:-1], ids.reshape(-1)[1:], casting="unsafe")
    loss_mask.fill(True)
    labels[:, -1] = IGNORE_INDEX
    loss_mask[:, -1] = False
    doc_last = doc_end - 1
    labels.reshape(-1)[doc_last] = IGNORE_INDEX
    loss_mask.reshape(-1)[doc_last] = False

    for row, n in zip(short.tolist(), lengths[short].tolist(), strict=True):
        if not tails_zeroed:
            ids[row, n:] = 0
        labels[row, n:] = IGNORE_INDEX
        loss_mask[row, n:] = False
        position_ids[row, n:] = 0

    cu = out["cu_seqlens"]
    cu[:] = lengths[:, None]
    cu[:, 0] = 0
    cu[doc_row, doc_k + 1] = doc_end - doc_row * seq_len
    out["num_docs"][:] = n_docs
    out["valid_token_count"][:] = lengths
    out["sample_ids"][:] = sample_ids
    return {key: torch.from_numpy(value) for key, value in out.items()}


def build_batch(
    tokens: np.ndarray,
    lengths: np.ndarray,
    doclens: list[np.ndarray],
    sample_ids: np.ndarray,
    max_docs: int,
    input_ids_dtype: torch.dtype = torch.int32,
) -> dict[str, torch.Tensor]:
    """One-off batch from ``tokens`` (B, T) filled up to ``lengths`` and per-row document lengths."""
    batch, seq_len = tokens.shape
    out = BufferPool(batch, seq_len, max_docs, numpy_id_dtype(input_ids_dtype), size=0).acquire()
    np.copyto(out["input_ids"], tokens, casting="unsafe")
    n_docs = np.fromiter((len(d) for d in doclens), dtype=np.int64, count=batch)
    flat = np.concatenate([np.asarray(d, np.int64) for d in doclens]) if batch else np.zeros(0, np.int64)
    return fill_batch(out, lengths, n_docs, flat, sample_ids)
