"""The global stream: epoch position -> (source, shard, row, sample id), for a mixture and a seed.

Pure and cheap to build: it depends only on the sources' shard row counts, the per-epoch counts, the
window size and the seed; never on world size, rank, workers, batch size or prefetch.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

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
        h = hashlib.sha256(f"stream/1|{self.seed}|{mixture.window_rows}|{self.counts}".encode())
        for src in mixture.sources:
            h.update(src.fingerprint.encode())
        self.fingerprint = h.hexdigest()[:16]

    def rows(self, epoch: int, start: int, count: int) -> RowRefs:
        source = np.full(count, -1, dtype=np.int64)
        shard = np.zeros(count, dtype=np.int64)
        row = np.zeros(count, dtype=np.int64)
        sample_id = np.full(count, -1, dtype=np.int64)
        src_idx, k = self.interleave.items(start, count)
        n = len(src_idx)
        source[:n] = src_idx
        for i in np.unique(src_idx):
            sel = np.flatnonzero(src_idx == i)
            positions = epoch * self.counts[i] + k[sel]
            s, r = self.orders[i].locate(positions)
            shard[sel], row[sel] = s, r
            sample_id[sel] = (int(i) << SOURCE_SHIFT) | (self.shard_offsets[i][s] + r)
        return RowRefs(source, shard, row, sample_id)
