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
def _flat_positions(count: int) -> np.ndarray:
    dtype = np.int32 if count < 2**31 else np.int64
    positions = np.arange(count, dtype=dtype)
    positions.flags.writeable = False
    return positions


def _segments(
    lengths: np.ndarray, n_docs: np.ndarray, doclens: np.ndarray, seq_len: int
) -> tuple[np.ndarray, ...]:
    """Per-document row, index and end inside the row; per-segment (documents + padding) values."""
    batch = len(lengths)
    doc_first = np.cumsum(n_docs) - n_docs
    doc_row = np.repeat(np.arange(batch), n_docs)
    doc_k = np.arange(len(doclens)) - doc_first[doc_row]
    row_token_start = np.cumsum(lengths) - lengths
    doc_end = np.cumsum(doclens) - row_token_start[doc_row]  # end of each document inside its row

    padded = lengths < seq_len
    seg_count = n_docs + padded
    seg_first = np.cumsum(seg_count) - seg_count
    total = int(seg_count.sum())
    seg_len = np.empty(total, np.int64)
    seg_value = np.zeros(total, np.int32)
    seg_start = np.empty(total, np.int64)
    doc_slot = seg_first[doc_row] + doc_k
    seg_len[doc_slot] = doclens
    seg_value[doc_slot] = doc_k + 1
    seg_start[doc_slot] = doc_row * seq_len + doc_end - doclens
    pad_rows = np.flatnonzero(padded)
    pad_slot = seg_first[pad_rows] + n_docs[pad_rows]
    seg_len[pad_slot] = seq_len - lengths[pad_rows]
    seg_start[pad_slot] = pad_rows * seq_len + lengths[pad_rows]  # positions there are zeroed afterwards
    return doc_row, doc_k, doc_end, seg_len, seg_value, seg_start


def fill_batch(
    out: dict[str, np.ndarray],
    lengths: np.ndarray,
    n_docs: np.ndarray,
    doclens: np.ndarray,
    sample_ids: np.ndarray,
) -> dict[str, torch.Tensor]:
    """Complete ``out`` (from :meth:`BufferPool.acquire`) whose ``input_ids`` rows hold ``lengths`` tokens.

    ``doclens`` is every row's document lengths, concatenated in row order (``n_docs`` per row).
    """
    ids = out["input_ids"]
    batch, seq_len = ids.shape
    max_docs = out["cu_seqlens"].shape[1] - 1
    lengths = np.asarray(lengths, dtype=np.int64)
    n_docs = np.asarray(n_docs, dtype=np.int64)
    doclens = np.asarray(doclens, dtype=np.int64)
    if n_docs.max(initial=0) > max_docs:
        raise ValueError(f"a row has {int(n_docs.max())} documents, more than max_docs_per_row={max_docs}")
    doc_row, doc_k, doc_end, seg_len, seg_value, seg_start = _segments(lengths, n_docs, doclens, seq_len)
    if not np.array_equal(np.bincount(doc_row, weights=doclens, minlength=batch), lengths):
        raise ValueError("document lengths do not add up to the row lengths")

    flat_positions = _flat_positions(batch * seq_len)
    segment_ids = out["segment_ids"]
    np.copyto(segment_ids.reshape(-1), np.repeat(seg_value, seg_len))
    position_ids = out["position_ids"]
    np.subtract(
        flat_positions,
        np.repeat(seg_start.astype(flat_positions.dtype), seg_len),
        out=position_ids.reshape(-1),
        casting="unsafe",
    )

    # loss_mask is written directly (1 byte a token) rather than read back from labels (8 bytes a token); it is
    # False exactly where labels get IGNORE_INDEX: the last column, each document's last token, padding.
    labels, loss_mask = out["labels"], out["loss_mask"]
    np.copyto(labels[:, :-1], ids[:, 1:], casting="unsafe")
    loss_mask.fill(True)
    labels[:, -1] = IGNORE_INDEX
    loss_mask[:, -1] = False
    doc_last = doc_row * seq_len + doc_end - 1
    labels.reshape(-1)[doc_last] = IGNORE_INDEX
    loss_mask.reshape(-1)[doc_last] = False

    short = np.flatnonzero(lengths < seq_len)
    for row, n in zip(short.tolist(), lengths[short].tolist(), strict=True):
        ids[row, n:] = 0
        labels[row, n:] = IGNORE_INDEX
        loss_mask[row, n:] = False
        position_ids[row, n:] = 0

    cu = out["cu_seqlens"]
    cu[:] = lengths[:, None]
    cu[:, 0] = 0
    cu[doc_row, doc_k + 1] = doc_end
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
