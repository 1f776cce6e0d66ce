"""Ragged token ids kept flat: ``values`` (uint32, every document's ids concatenated) and ``offsets``
(int64, ``len(docs) + 1``; document ``i`` is ``values[offsets[i]:offsets[i + 1]]``).

Encoders return this shape so the tokenize stage never builds a Python list per document.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

Flat = tuple[np.ndarray, np.ndarray]  # (values uint32, offsets int64)


def offsets_of(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def flat_from_lists(ids: Sequence[Sequence[int]]) -> Flat:
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    offsets = offsets_of(lengths)
    values = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint32, count=int(offsets[-1]))
    return values, offsets


def flat_from_arrays(arrays: Sequence[np.ndarray]) -> Flat:
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    values = np.concatenate(arrays).astype(np.uint32, copy=False) if arrays else np.zeros(0, dtype=np.uint32)
    return values, offsets_of(lengths)


def doc(flat: Flat, i: int) -> np.ndarray:
    values, offsets = flat
    return values[offsets[i] : offsets[i + 1]]


def append_token(flat: Flat, token: int) -> Flat:
    """Every document with ``token`` appended (the EOS that closes each document)."""
    values, offsets = flat
    n_docs = len(offsets) - 1
    new_offsets = offsets + np.arange(n_docs + 1, dtype=np.int64)
    out = np.empty(len(values) + n_docs, dtype=np.uint32)
    ends = new_offsets[1:] - 1
    body = np.ones(len(out), dtype=bool)
    body[ends] = False
    out[body] = values
    out[ends] = token
    return out, new_offsets


def select_docs(flat: Flat, keep: np.ndarray) -> Flat:
    """Only the documents where ``keep`` (bool, one per document) is true."""
    values, offsets = flat
    lengths = np.diff(offsets)
    return values[np.repeat(keep, lengths)], offsets_of(lengths[keep])
