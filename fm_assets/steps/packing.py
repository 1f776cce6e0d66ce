"""Best-fit-decreasing packing of documents into rows of T tokens (only documents longer than T are split)."""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass


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
