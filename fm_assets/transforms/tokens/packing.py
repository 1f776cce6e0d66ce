"""Best-fit-decreasing packing of documents into rows of T tokens (only documents longer than T are split)."""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Piece:
    doc: int  # index of the document in the unit
    start: int  # token offset inside the document
    length: int


def split_documents(lengths: list[int], capacity: int) -> list[Piece]:
    """One piece per document, except documents longer than ``capacity``: full-row pieces plus a remainder."""
    pieces = []
    for doc, length in enumerate(lengths):
        start = 0
        while length - start > capacity:
            pieces.append(Piece(doc, start, capacity))
            start += capacity
        if length - start > 0:
            pieces.append(Piece(doc, start, length - start))
    return pieces


def best_fit_decreasing(pieces: list[Piece], capacity: int) -> list[list[Piece]]:
    """Pack pieces into bins of ``capacity``: longest first, each into the fullest bin it still fits.

    Ties break on input order, so the result is a pure function of the input. Bins come out in
    creation order and pieces inside a bin in placement order.
    """
    order = sorted(range(len(pieces)), key=lambda i: (-pieces[i].length, i))
    bins: list[list[Piece]] = []
    open_bins: list[tuple[int, int]] = []  # (remaining capacity, bin index), kept sorted
    for i in order:
        piece = pieces[i]
        slot = bisect_left(open_bins, (piece.length, -1))
        if slot < len(open_bins):
            remaining, index = open_bins.pop(slot)
        else:
            remaining, index = capacity, len(bins)
            bins.append([])
        bins[index].append(piece)
        if remaining - piece.length > 0:
            insort(open_bins, (remaining - piece.length, index))
    return bins


def pack_documents(lengths: list[int], capacity: int, min_fragment: int = 1) -> list[list[Piece]]:
    """Rows for documents of ``lengths``: short documents whole (best-fit decreasing), long ones split.

    Documents no longer than ``capacity`` are never split. Documents longer than it are split anyway,
    so where they are cut is free: their tokens, laid end to end, first fill whole rows, and the last
    part of that stream fills the gaps the short documents left (gaps smaller than ``min_fragment``
    stay empty), then one final partial row. At most one row is not full, beyond those small gaps.
    """
    short = [Piece(doc, 0, n) for doc, n in enumerate(lengths) if 0 < n <= capacity]
    long_docs = [(doc, n) for doc, n in enumerate(lengths) if n > capacity]
    bins = best_fit_decreasing(short, capacity)
    fillable = [(index, capacity - sum(p.length for p in row)) for index, row in enumerate(bins)]
    fillable = [(index, gap) for index, gap in fillable if gap >= min_fragment]
    stream_total = sum(n for _, n in long_docs)
    gap_total = sum(gap for _, gap in fillable)
    full_rows = max(0, (stream_total - gap_total) // capacity)

    stream = _Stream(long_docs)
    rows = [stream.take(capacity) for _ in range(full_rows)]
    for index, gap in fillable:
        if stream.remaining == 0:
            break
        bins[index].extend(stream.take(gap))
    while stream.remaining:
        rows.append(stream.take(capacity))
    return rows + bins


class _Stream:
    """Long documents laid end to end; ``take(n)`` cuts the next ``n`` tokens into per-document pieces."""

    def __init__(self, docs: list[tuple[int, int]]) -> None:
        self.docs = docs
        self.position = 0  # index into docs
        self.offset = 0  # token offset inside docs[position]
        self.remaining = sum(n for _, n in docs)

    def take(self, n: int) -> list[Piece]:
        pieces = []
        while n > 0 and self.remaining > 0:
            doc, length = self.docs[self.position]
            size = min(n, length - self.offset)
            pieces.append(Piece(doc, self.offset, size))
            self.offset += size
            self.remaining -= size
            n -= size
            if self.offset == length:
                self.position += 1
                self.offset = 0
        return pieces


def gather_pieces(
    values: np.ndarray, doc_offsets: np.ndarray, rows: list[list[Piece]]
) -> tuple[np.ndarray, np.ndarray]:
    """Lay a per-token array of documents out as packed rows: (values in row order, row offsets).

    ``values[doc_offsets[d]:doc_offsets[d + 1]]`` belong to document ``d``; each piece takes its slice, so
    tokens and any per-token column aligned with them come out aligned in the rows.
    """
    lengths = [sum(p.length for p in row) for row in rows]
    row_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_offsets[1:])
    chunks = [
        values[doc_offsets[p.doc] + p.start : doc_offsets[p.doc] + p.start + p.length]
        for row in rows
        for p in row
    ]
    out = np.concatenate(chunks) if chunks else values[:0]
    return out, row_offsets
