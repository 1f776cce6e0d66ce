"""Errors of the media loader: corrupt samples, and the refusals it shares with the text loader.

``NamespaceError`` and ``RevokedDatasetError`` are :mod:`fm_loader.access`'s: one definition, so a trainer
catches the same exception whichever loader refused.
"""

from __future__ import annotations

from fm_loader.access import NamespaceError, RevokedDatasetError, check_release
from fm_loader.sources import CorruptRowError

__all__ = ["CorruptSampleError", "NamespaceError", "RevokedDatasetError", "check_release"]


class CorruptSampleError(CorruptRowError):
    """A media sample failed its checksum twice (read, then re-read), or its bytes do not decode.

    A :class:`~fm_loader.sources.CorruptRowError`, so handlers written for text shards catch it too.

    Attributes:
        shard: Path or URI of the shard.
        row: Sample index inside the shard.
        key: The sample's key (its WebDataset ``__key__``).
    """

    def __init__(self, shard: str, row: int, key: str, detail: str) -> None:
        RuntimeError.__init__(self, f"corrupt sample {row} ({key}) in shard {shard}: {detail}")
        self.shard = shard
        self.row = row
        self.key = key
