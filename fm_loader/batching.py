"""Turns raw packed rows (tokens + document lengths) into the fixed-shape training batch.

Every batch has the same keys, dtypes and shapes (``B`` rows of this rank, ``T = seq_len``,
``D = max_docs_per_row``):

=================== ============ ==========================================================================
key                 shape        meaning
=================== ============ ==========================================================================
input_ids           (B, T)       token ids, 0 on padding
labels              (B, T)       next token inside the same document, else -100 (document ends, padding)
loss_mask           (B, T) bool  ``labels != -100``
position_ids        (B, T)       position inside the token's document (resets per document), 0 on padding
segment_ids         (B, T)       1-based document index inside the row, 0 on padding
cu_seqlens          (B, D+1)     cumulative document lengths per row, padded by repeating the row length
num_docs            (B,)         number of valid entries in ``cu_seqlens`` minus one
valid_token_count   (B,)         real (non-padding) tokens per row
sample_ids          (B,)         global row id (source << 48 | row inside the source), -1 for a padding row
=================== ============ ==========================================================================
"""

from __future__ import annotations

import numpy as np
import torch

IGNORE_INDEX = -100
SOURCE_SHIFT = 48


def build_batch(
    tokens: np.ndarray,
    lengths: np.ndarray,
    doclens: list[np.ndarray],
    sample_ids: np.ndarray,
    max_docs: int,
) -> dict[str, torch.Tensor]:
    """``tokens`` (B, T) int64 with rows filled up to ``lengths``; padding beyond is overwritten with 0."""
    batch, seq_len = tokens.shape
    positions = np.arange(seq_len, dtype=np.int64)
    valid = positions[None, :] < lengths[:, None]
    tokens[~valid] = 0

    n_docs = np.fromiter((len(d) for d in doclens), dtype=np.int64, count=batch)
    if n_docs.max(initial=0) > max_docs:
        raise ValueError(f"a row has {int(n_docs.max())} documents, more than max_docs_per_row={max_docs}")
    cu = np.zeros((batch, max_docs + 1), dtype=np.int64)
    if n_docs.sum():
        flat = np.concatenate(doclens).astype(np.int64)
        row_of_doc = np.repeat(np.arange(batch), n_docs)
        first_doc = np.cumsum(n_docs) - n_docs
        doc_in_row = np.arange(len(flat)) - np.repeat(first_doc, n_docs)
        ends = np.cumsum(flat)
        head = np.minimum(first_doc, len(flat) - 1)  # rows without documents repeat their entry 0 times
        ends -= np.repeat(ends[head] - flat[head], n_docs)  # cumulative length inside each row
        cu[row_of_doc, doc_in_row + 1] = ends
        starts_marks = np.zeros((batch, seq_len + 1), dtype=np.int32)
        starts_marks[row_of_doc, ends - flat] = 1
        segment = np.cumsum(starts_marks[:, :seq_len], axis=1, dtype=np.int32)
        # Document start of every position: mark each start with its own index, then carry it forward.
        doc_start = np.zeros((batch, seq_len + 1), dtype=np.int32)
        doc_start[row_of_doc, ends - flat] = ends - flat
        np.maximum.accumulate(doc_start, axis=1, out=doc_start)
        doc_start = doc_start[:, :seq_len]
    else:
        segment = np.zeros((batch, seq_len), dtype=np.int32)
        doc_start = np.zeros((batch, seq_len), dtype=np.int32)
    np.maximum.accumulate(cu, axis=1, out=cu)
    segment[~valid] = 0

    position_ids = positions[None, :].astype(np.int32) - doc_start
    position_ids[~valid] = 0

    labels = np.full((batch, seq_len), IGNORE_INDEX, dtype=np.int64)
    same_doc = (segment[:, 1:] == segment[:, :-1]) & (segment[:, :-1] > 0)
    labels[:, :-1] = np.where(same_doc, tokens[:, 1:], IGNORE_INDEX)

    return {
        "input_ids": torch.from_numpy(tokens),
        "labels": torch.from_numpy(labels),
        "loss_mask": torch.from_numpy(labels != IGNORE_INDEX),
        "position_ids": torch.from_numpy(position_ids.astype(np.int32)),
        "segment_ids": torch.from_numpy(segment),
        "cu_seqlens": torch.from_numpy(cu.astype(np.int32)),
        "num_docs": torch.from_numpy(n_docs.astype(np.int32)),
        "valid_token_count": torch.from_numpy(lengths.astype(np.int32)),
        "sample_ids": torch.from_numpy(sample_ids.astype(np.int64)),
    }
