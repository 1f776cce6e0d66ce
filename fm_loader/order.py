"""The global row order: a pure function of (source sizes, mixture counts, seed, epoch, position).

Two layers, both computed in closed form so any position can be reached in O(number of shards):

* :class:`SourceOrder` - one source's endless stream of passes. Pass ``p`` is a seeded permutation of the
  shards, cut into windows of consecutive shards holding at least ``window_rows`` rows, with a seeded
  permutation of the rows inside each window. Epoch ``e`` of a source that contributes ``n`` rows per
  epoch is stream positions ``[e*n, (e+1)*n)``: ``n > rows`` tiles whole shuffled passes, ``n < rows``
  walks through the passes over successive epochs.
* :class:`Interleave` - how an epoch of ``M = sum(n_i)`` positions is shared among sources. Positions are
  cut into blocks; before block ``b`` source ``i`` has given exactly ``floor(b*B*n_i/M)`` rows (exact
  integers), and inside a block items are merged by their fractional position ``(k+0.5)/n_i``. So every
  window of the epoch holds each source's share to within a couple of rows, on every rank.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

_EMPTY = np.zeros(0, np.int64)
_EMPTY.flags.writeable = False


def _rng(*words: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(w) for w in words])))


@dataclass(frozen=True)
class _PassLayout:
    shard_perm: np.ndarray  # pass position -> shard index
    cum_rows: np.ndarray  # len S+1, row offset of each permuted shard within the pass
    window_starts: np.ndarray  # row offset of each window within the pass, plus the pass length at the end
    window_list: list[int]  # the same as a list (bisect on it beats a numpy call for one position)


def _greedy_windows(cum_rows: np.ndarray, window_rows: int) -> np.ndarray:
    """Cut the permuted shard sequence into windows of consecutive shards, each >= window_rows rows
    (the last one folds into its predecessor when short). Returns window row starts plus the total."""
    total = int(cum_rows[-1])
    # For every shard boundary, the first boundary at least window_rows further on; then walk that chain.
    jump = np.searchsorted(cum_rows, cum_rows[:-1] + window_rows, side="left").tolist()
    bounds = cum_rows.tolist()
    starts, slot, last = [0], 0, len(bounds) - 1
    while True:
        slot = jump[slot]
        if slot >= last:
            break
        starts.append(bounds[slot])
    if len(starts) > 1 and total - starts[-1] < window_rows // 2:
        starts.pop()
    starts.append(total)
    return np.asarray(starts, dtype=np.int64)


class SourceOrder:
    """Maps positions of one source's stream to (shard, row) with a hierarchical shuffle."""

    def __init__(
        self, shard_rows: np.ndarray, seed: int, source_index: int, window_rows: int = 8192, cache: int = 4
    ) -> None:
        self.shard_rows = np.asarray(shard_rows, dtype=np.int64)
        self.rows = int(self.shard_rows.sum())
        if self.rows <= 0:
            raise ValueError("a source needs at least one row")
        self.seed = seed
        self.source_index = source_index
        self.window_rows = max(1, int(window_rows))
        self._passes: OrderedDict[int, _PassLayout] = OrderedDict()
        self._windows: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._window_rows: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = (
            OrderedDict()
        )
        self._cache = cache
        self._source_offsets = np.zeros(len(self.shard_rows) + 1, dtype=np.int64)
        np.cumsum(self.shard_rows, out=self._source_offsets[1:])

    def _layout(self, pass_index: int) -> _PassLayout:
        layout = self._passes.get(pass_index)
        if layout is not None:
            self._passes.move_to_end(pass_index)
            return layout
        perm = _rng(self.seed, self.source_index, pass_index, 0).permutation(len(self.shard_rows))
        cum = np.zeros(len(perm) + 1, dtype=np.int64)
        np.cumsum(self.shard_rows[perm], out=cum[1:])
        starts = _greedy_windows(cum, self.window_rows)
        layout = _PassLayout(perm, cum, starts, starts.tolist())
        self._passes[pass_index] = layout
        if len(self._passes) > self._cache:
            self._passes.popitem(last=False)
        return layout

    def _window_perm(self, pass_index: int, window: int, size: int) -> np.ndarray:
        key = (pass_index, window)
        perm = self._windows.get(key)
        if perm is None:
            perm = _rng(self.seed, self.source_index, pass_index, window + 1).permutation(size)
            self._windows[key] = perm
            if len(self._windows) > self._cache * 2:
                self._windows.popitem(last=False)
        else:
            self._windows.move_to_end(key)
        return perm

    def _window_map(self, pass_index: int, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(shard, row, row of the source) of every position of one window, in stream order (cached)."""
        key = (pass_index, window)
        found = self._window_rows.get(key)
        if found is not None:
            self._window_rows.move_to_end(key)
            return found
        layout = self._layout(pass_index)
        lo, hi = int(layout.window_starts[window]), int(layout.window_starts[window + 1])
        permuted = self._window_perm(pass_index, window, hi - lo) + lo
        slot = np.searchsorted(layout.cum_rows, permuted, side="right") - 1
        shards = layout.shard_perm[slot]
        rows = permuted - layout.cum_rows[slot]
        found = (shards, rows, self._source_offsets[shards] + rows)
        for array in found:
            array.flags.writeable = False
        self._window_rows[key] = found
        if len(self._window_rows) > 2:
            self._window_rows.popitem(last=False)
        return found

    def locate_range(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Consecutive stream positions ``[start, start + count)`` -> (shard, row, row of the source).

        Same answer as :meth:`locate` on ``np.arange(start, start + count)`` (plus each row's index in the
        source, i.e. counted over the shards in manifest order), but a batch inside one window costs a few
        slices of that window's cached mapping.

        Args:
            start: First stream position (``>= 0``).
            count: Number of positions.

        Returns:
            Three int64 arrays of ``count`` entries; read-only (they may be views of the cache).
        """
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        pos, end = int(start), int(start) + int(count)
        while pos < end:
            pass_index, offset = divmod(pos, self.rows)
            starts = self._layout(pass_index).window_list
            window = bisect_right(starts, offset) - 1
            lo, hi = starts[window], starts[window + 1]
            take = min(end - pos, hi - offset)
            a, b = offset - lo, offset - lo + take
            shards, rows, ids = self._window_map(pass_index, window)
            parts.append((shards[a:b], rows[a:b], ids[a:b]))
            pos += take
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return _EMPTY, _EMPTY, _EMPTY
        shards, rows, ids = (np.concatenate(column) for column in zip(*parts, strict=True))
        for array in (shards, rows, ids):
            array.flags.writeable = False
        return shards, rows, ids

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stream positions -> (shard index, row index inside the shard)."""
        positions = np.asarray(positions, dtype=np.int64)
        shards = np.empty_like(positions)
        rows = np.empty_like(positions)
        passes = positions // self.rows
        offsets = positions - passes * self.rows
        for pass_index in np.unique(passes):
            in_pass = passes == pass_index
            layout = self._layout(int(pass_index))
            off = offsets[in_pass]
            windows = np.searchsorted(layout.window_starts, off, side="right") - 1
            permuted = np.empty_like(off)
            for window in np.unique(windows):
                sel = windows == window
                lo, hi = layout.window_starts[window], layout.window_starts[window + 1]
                perm = self._window_perm(int(pass_index), int(window), int(hi - lo))
                permuted[sel] = lo + perm[off[sel] - lo]
            slot = np.searchsorted(layout.cum_rows, permuted, side="right") - 1
            shards[in_pass] = layout.shard_perm[slot]
            rows[in_pass] = permuted - layout.cum_rows[slot]
        return shards, rows


class Interleave:
    """Deterministic proportional merge of sources contributing ``counts[i]`` rows to one epoch."""

    def __init__(self, counts: list[int], block: int = 4096) -> None:
        self.counts = [int(c) for c in counts]
        if any(c < 0 for c in self.counts) or sum(self.counts) <= 0:
            raise ValueError(f"invalid per-epoch counts {counts}")
        self.total = sum(self.counts)
        self.block = block
        self.num_blocks = -(-self.total // block)
        self._cached: tuple[int, np.ndarray, np.ndarray] | None = None

    def _before_block(self, b: int) -> list[int]:
        """Rows each source has given before block ``b`` (exact integer arithmetic).

        Source ``i``'s row ``k`` sorts at key ``(k + 0.5) / counts[i]``; a block holds every row whose key lies
        in ``[b * block / total, (b + 1) * block / total)``, so the concatenated blocks are the exact global merge
        by key whatever the block size, and no source lags its share by more than one row in any prefix.
        """
        done = min(b * self.block, self.total)
        # rows k with (k + 0.5) / c < done / total, i.e. k < (2 * done * c - total) / (2 * total)
        return [min(c, max(0, -(-(2 * done * c - self.total) // (2 * self.total)))) for c in self.counts]

    def _block_start(self, b: int) -> int:
        return sum(self._before_block(b))

    def _find_block(self, position: int) -> int:
        lo, hi = 0, self.num_blocks - 1
        while lo < hi:  # last block whose start <= position
            mid = (lo + hi + 1) // 2
            if self._block_start(mid) <= position:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _block_items(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        if self._cached is not None and self._cached[0] == b:
            return self._cached[1], self._cached[2]
        first, last = self._before_block(b), self._before_block(b + 1)
        sources, ks, keys = [], [], []
        for i, (lo, hi) in enumerate(zip(first, last, strict=True)):
            if hi > lo:
                k = np.arange(lo, hi, dtype=np.int64)
                sources.append(np.full(hi - lo, i, dtype=np.int64))
                ks.append(k)
                keys.append((k + 0.5) / self.counts[i])
        if not sources:  # possible only when a block is smaller than the number of sources
            sources, ks, keys = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
        src, k_all, key = np.concatenate(sources), np.concatenate(ks), np.concatenate(keys)
        order = np.lexsort((src, key))
        self._cached = (b, src[order], k_all[order])
        return self._cached[1], self._cached[2]

    def items(self, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(source index, index k within that source's epoch share) for positions [start, start+count)."""
        end = min(start + count, self.total)
        if start >= end:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        if len(self.counts) == 1:
            return np.zeros(end - start, np.int64), np.arange(start, end, dtype=np.int64)
        b = self._find_block(start)
        block_start = self._block_start(b)
        src_parts, k_parts = [], []
        pos = start
        while pos < end:
            src, ks = self._block_items(b)
            lo = pos - block_start
            hi = min(len(src), end - block_start)
            src_parts.append(src[lo:hi])
            k_parts.append(ks[lo:hi])
            pos = block_start + hi
            block_start += len(src)
            b += 1
        return np.concatenate(src_parts), np.concatenate(k_parts)
