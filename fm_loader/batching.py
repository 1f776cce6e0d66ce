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

With ``Loader(extra_columns={name: fill})`` every batch also has one ``(B, T)`` int32 tensor per name
(:mod:`fm_loader.columns`).

``input_ids`` is int32 by default: ``torch.nn.Embedding`` takes it as is and it halves the bytes written;
``labels`` stays int64 because ``cross_entropy`` needs it.

Derived fields are computed for the whole batch at once from the document lengths: every row is cut into
segments (its documents, plus one padding segment when it is short), and ``np.repeat`` over the segment
lengths writes segment ids and segment starts for all ``B*T`` positions in one pass each. No per-token
Python work, and no per-row work except zeroing the tail of short rows.

Batches are written into buffers from a :class:`BufferPool`; a buffer set is reused only when nothing
outside the pool references its arrays any more (the tensors of earlier batches were dropped), which avoids
page-faulting fresh memory for every batch without ever overwriting a batch that is still in use.
``segment_ids`` is the one exception: it is ``np.repeat``'s own result (a new array per batch, which the
allocator serves from memory freed by earlier batches), one copy cheaper than writing it into a buffer.
"""

from __future__ import annotations

import sys
from functools import lru_cache

import numpy as np
import torch

_NO_ROWS = np.zeros(0, np.int64)
IGNORE_INDEX = -100
"""``labels`` value where no loss is taken (document ends, padding); ``cross_entropy``'s default."""
SOURCE_SHIFT = 48
"""``sample_ids`` is ``source << SOURCE_SHIFT | row inside the source``."""

_ID_DTYPES = {torch.int32: np.int32, torch.int64: np.int64}
BATCH_KEYS = (
    "input_ids",
    "labels",
    "loss_mask",
    "position_ids",
    "segment_ids",
    "cu_seqlens",
    "num_docs",
    "valid_token_count",
    "sample_ids",
)
"""The keys of every batch, in order."""


def numpy_id_dtype(dtype: torch.dtype) -> type[np.integer]:
    """The numpy dtype behind an ``input_ids`` torch dtype (int32 or int64)."""
    if dtype not in _ID_DTYPES:
        raise ValueError(f"input_ids_dtype must be torch.int32 or torch.int64, not {dtype}")
    return _ID_DTYPES[dtype]


CHUNK_TOKENS = 1 << 17
"""Most tokens whose derived fields one ``np.repeat`` writes: a bigger temporary (over 512 KiB of int32) is,
with glibc, mapped fresh and page-faulted on every batch. Bigger batches are filled in row chunks."""


def chunk_rows(seq_len: int) -> int:
    """Rows per chunk of :data:`CHUNK_TOKENS` (at least one)."""
    return max(1, CHUNK_TOKENS // max(1, seq_len))


class BufferPool:
    """Reusable output arrays for batches of one shape; a set is handed out again only once unreferenced."""

    def __init__(
        self,
        batch: int,
        seq_len: int,
        max_docs: int,
        id_dtype: type[np.integer],
        size: int = 4,
        extra_columns: tuple[str, ...] = (),
    ):
        """Describe the arrays of one set (nothing is allocated until :meth:`acquire`).

        Args:
            batch: Rows ``B``.
            seq_len: Row length ``T``.
            max_docs: Documents per row ``cu_seqlens`` has room for.
            id_dtype: numpy dtype of ``input_ids``.
            size: Sets kept for reuse; further sets are handed out but not kept.
            extra_columns: Names of per-token columns, one ``(B, T)`` int32 array each.
        """
        self.shapes: dict[str, tuple[tuple[int, ...], type[np.generic]]] = {
            "input_ids": ((batch, seq_len), id_dtype),
            "labels": ((batch, seq_len), np.int64),
            "loss_mask": ((batch, seq_len), np.bool_),
            "position_ids": ((batch, seq_len), np.int32),
            "cu_seqlens": ((batch, max_docs + 1), np.int32),
            "num_docs": ((batch,), np.int32),
            "valid_token_count": ((batch,), np.int32),
            "sample_ids": ((batch,), np.int64),
        }
        if batch > chunk_rows(seq_len):  # filled in chunks (see fill_batch): segment_ids needs a buffer too
            self.shapes["segment_ids"] = ((batch, seq_len), np.int32)
        for name in extra_columns:
            self.shapes[name] = ((batch, seq_len), np.int32)
        self.size = size
        self._sets: list[tuple[dict[str, np.ndarray], tuple[int, ...]]] = []

    @staticmethod
    def _refcounts(arrays: dict[str, np.ndarray]) -> tuple[int, ...]:
        return tuple(sys.getrefcount(a) for a in arrays.values())

    def acquire(self) -> dict[str, np.ndarray]:
        """A set of arrays that nothing outside the pool references (contents undefined).

        Returns:
            Key -> array, as in :attr:`shapes`.
        """
        for arrays, idle in self._sets:
            if self._refcounts(arrays) == idle:
                return arrays
        arrays = {key: np.empty(shape, dtype) for key, (shape, dtype) in self.shapes.items()}
        arrays["cu_seqlens"][:, 0] = 0  # fill_batch writes the other columns only
        if len(self._sets) < self.size:
            self._sets.append((arrays, self._refcounts(arrays)))
        return arrays


@lru_cache(maxsize=16)
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
    start and end, and one ``np.repeat`` each writes ``segment_ids`` and ``position_ids`` (per chunk of
    :data:`CHUNK_TOKENS` for big batches).

    Args:
        out: Buffers from :meth:`BufferPool.acquire`; ``input_ids`` holds the rows' tokens.
        lengths: Tokens per row.
        n_docs: Documents per row.
        doclens: Every row's document lengths, concatenated in row order (``n_docs`` per row).
        sample_ids: Global row id per row, -1 for padding rows.
        tails_zeroed: ``input_ids`` is already 0 past each row's length (skips zeroing it again).

    Returns:
        The batch: a dict of tensors (keys in :data:`BATCH_KEYS` order) sharing memory with ``out``.

    Raises:
        ValueError: A row has more documents than ``cu_seqlens`` has room for, or its document lengths do not
            add up to its length.
    """
    ids, cu = out["input_ids"], out["cu_seqlens"]
    batch, seq_len = ids.shape
    width = cu.shape[1]
    lengths = np.asarray(lengths, dtype=np.int64)
    n_docs = np.asarray(n_docs, dtype=np.int64)
    doclens = np.asarray(doclens, dtype=np.int64)
    if n_docs.max(initial=0) >= width:
        raise ValueError(f"a row has {int(n_docs.max())} documents, more than max_docs_per_row={width - 1}")
    doc_row = np.repeat(_arange(batch), n_docs)
    if not np.array_equal(np.bincount(doc_row, weights=doclens, minlength=batch), lengths):
        raise ValueError("document lengths do not add up to the row lengths")
    doc_first = np.cumsum(n_docs)
    doc_first -= n_docs
    doc_k1 = _arange(len(doclens) + 1)[1:] - doc_first[doc_row]  # 1-based index of each document in its row
    full = lengths.min(initial=seq_len) == seq_len
    short = _NO_ROWS if full else np.flatnonzero(lengths < seq_len)
    if full:  # the segments are the documents
        seg_len, seg_value = doclens, doc_k1.astype(np.int32)
        seg_end = np.cumsum(doclens)
        doc_end = seg_end
        segs_before_row = doc_first
    else:  # a padding segment after the documents of each short row
        is_short = lengths < seq_len
        pads_before = np.cumsum(is_short)
        pads_before -= is_short  # short rows before each row
        doc_slot = _arange(len(doclens)) + pads_before[doc_row]
        pad_slot = doc_first[short] + n_docs[short] + pads_before[short]
        seg_len = np.empty(len(doclens) + len(short), np.int64)
        seg_len[doc_slot] = doclens
        seg_len[pad_slot] = seq_len - lengths[short]
        seg_value = np.zeros(len(seg_len), np.int32)
        seg_value[doc_slot] = doc_k1
        seg_end = np.cumsum(seg_len)
        doc_end = seg_end[doc_slot]
        segs_before_row = doc_first + pads_before
    flat_positions = _flat_positions(batch * seq_len)
    seg_start = np.subtract(
        seg_end, seg_len, out=np.empty(len(seg_len), flat_positions.dtype), casting="unsafe"
    )

    position_ids = out["position_ids"]
    step = chunk_rows(seq_len)
    if batch <= step:
        # segment_ids is np.repeat's own result (a fresh array: writing it into a pooled buffer costs a copy)
        segment_ids = np.repeat(seg_value, seg_len).reshape(batch, seq_len)
        np.subtract(
            flat_positions, np.repeat(seg_start, seg_len), out=position_ids.reshape(-1), casting="unsafe"
        )
    else:
        segment_ids = out["segment_ids"]
        bounds = np.append(segs_before_row, len(seg_len)).tolist()
        for r0 in range(0, batch, step):
            r1 = min(batch, r0 + step)
            s0, s1 = bounds[r0], bounds[r1]
            lens = seg_len[s0:s1]
            np.positive(np.repeat(seg_value[s0:s1], lens), out=segment_ids[r0:r1].reshape(-1))  # see labels
            np.subtract(
                flat_positions[r0 * seq_len : r1 * seq_len],
                np.repeat(seg_start[s0:s1], lens),
                out=position_ids[r0:r1].reshape(-1),
                casting="unsafe",
            )

    # loss_mask is written directly (1 byte a token) rather than read back from labels (8 bytes a token); it is
    # False exactly where labels get IGNORE_INDEX: the last column, each document's last token, padding.
    labels, loss_mask = out["labels"], out["loss_mask"]
    if ids.dtype == labels.dtype:
        # Not np.copyto: a same-dtype copy is a memmove, and this one's source is 8 bytes past its destination
        # modulo 4 KiB, which makes memmove's stores and loads alias (ten times slower on some CPUs).
        np.positive(ids.reshape(-1)[1:], out=labels.reshape(-1)[:-1])
    else:
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

    cu[:, 1:] = lengths[:, None]  # column 0 stays 0 (BufferPool.acquire)
    doc_end -= doc_row * seq_len  # end of each document inside its row (doc_last is done with doc_end)
    doc_row *= width
    doc_row += doc_k1
    cu.reshape(-1)[doc_row] = doc_end
    out["num_docs"][:] = n_docs
    out["valid_token_count"][:] = lengths
    out["sample_ids"][:] = sample_ids
    from_numpy = torch.from_numpy
    return {
        "input_ids": from_numpy(ids),
        "labels": from_numpy(labels),
        "loss_mask": from_numpy(loss_mask),
        "position_ids": from_numpy(position_ids),
        "segment_ids": from_numpy(segment_ids),
        "cu_seqlens": from_numpy(cu),
        "num_docs": from_numpy(out["num_docs"]),
        "valid_token_count": from_numpy(out["valid_token_count"]),
        "sample_ids": from_numpy(out["sample_ids"]),
    }


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
