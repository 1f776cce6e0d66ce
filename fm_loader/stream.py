"""The global stream: epoch position -> (source, shard, row, sample id), for a mixture and a seed.

Pure and cheap to build: it depends only on the sources' shard row counts, the per-epoch counts, the
window size and the seed; never on world size, rank, workers, batch size or prefetch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fm_loader.batching import SOURCE_SHIFT
from fm_loader.mixture import Mixture
from fm_loader.order import Interleave, SourceOrder


@dataclass(frozen=True)
class RowRefs:
    """Rows of one slice of the stream; ``source == -1`` marks padding past the end of an epoch."""

    source: np.ndarray
    shard: np.ndarray
    row: np.ndarray
    sample_id: np.ndarray


class GlobalStream:
    """The epoch-position -> row mapping of a mixture under a seed (see the module docstring).

    Attributes:
        seed: Seed of the shuffle.
        counts: Rows each source contributes per epoch.
        orders: One :class:`~fm_loader.order.SourceOrder` per source.
        epoch_rows: Rows per epoch (the sum of ``counts``).
    """

    def __init__(self, mixture: Mixture, seed: int) -> None:
        self.seed = int(seed)
        self.counts = list(mixture.counts)
        self.orders = [
            SourceOrder(src.shard_rows, self.seed, i, mixture.window_rows)
            for i, src in enumerate(mixture.sources)
        ]
        self.shard_offsets = [np.concatenate([[0], np.cumsum(src.shard_rows)]) for src in mixture.sources]
        self.interleave = Interleave(self.counts)
        self.epoch_rows = self.interleave.total
        self._mixture = mixture

    @cached_property
    def fingerprint(self) -> str:
        """Identifies the stream (sources, counts, window size, seed); computed on first use (a pass over every
        shard of every source), which keeps it out of the loader's start."""
        # v2 changed how mixtures interleave (exact merge by key); a single source's order is the same as v1,
        # so its runs keep resuming across the upgrade
        version = 2 if len(self.counts) > 1 else 1
        h = hashlib.sha256(f"stream/{version}|{self.seed}|{self._mixture.window_rows}|{self.counts}".encode())
        for src in self._mixture.sources:
            h.update(src.fingerprint.encode())
        return h.hexdigest()[:16]

    def rows(self, epoch: int, start: int, count: int) -> RowRefs:
        """The rows at positions ``[start, start + count)`` of epoch ``epoch`` (padding past its end).

        Args:
            epoch: Epoch number.
            start: First position inside the epoch.
            count: Number of rows.

        Returns:
            One entry per position; ``source == -1`` (``shard == row == 0``, ``sample_id == -1``) past the end.
        """
        if len(self.counts) == 1:  # one source: its positions in this slice are consecutive
            n = max(0, min(count, self.epoch_rows - start))
            shard, row, ids = self.orders[0].locate_range(epoch * self.counts[0] + start, n)
            if n == count:
                return RowRefs(np.zeros(count, np.int64), shard, row, ids)
            pad = count - n
            return RowRefs(
                np.concatenate([np.zeros(n, np.int64), np.full(pad, -1, np.int64)]),
                np.concatenate([shard, np.zeros(pad, np.int64)]),
                np.concatenate([row, np.zeros(pad, np.int64)]),
                np.concatenate([ids, np.full(pad, -1, np.int64)]),
            )
        source = np.full(count, -1, dtype=np.int64)
        shard = np.zeros(count, dtype=np.int64)
        row = np.zeros(count, dtype=np.int64)
        sample_id = np.full(count, -1, dtype=np.int64)
        src_idx, k = self.interleave.items(start, count)
        n = len(src_idx)
        source[:n] = src_idx
        for i in np.unique(src_idx):
            sel = np.flatnonzero(src_idx == i)
            ks = k[sel]
            if int(ks[-1]) - int(ks[0]) == len(ks) - 1:  # a source's rows come in order: consecutive
                s, r, ids = self.orders[i].locate_range(epoch * self.counts[i] + int(ks[0]), len(ks))
            else:
                s, r = self.orders[i].locate(epoch * self.counts[i] + ks)
                ids = self.shard_offsets[i][s] + r
            shard[sel], row[sel] = s, r
            sample_id[sel] = (int(i) << SOURCE_SHIFT) | ids
        return RowRefs(source, shard, row, sample_id)
