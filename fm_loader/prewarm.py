"""Hot tier for remote shards: fetch the shards of the coming rows in the background and pin the ones the
window will read again.

A :class:`Prewarmer` thread walks this rank's slices of the next global batches (at most ``rows_ahead``
global rows past the trainer's position) with its own copy of the global stream (the stream is a pure
function, so it agrees with the batches that will be built) and downloads each shard's files into the
:class:`~fm_loader.storage.ShardCache` before any reader asks for them. Every file it fetched stays pinned
until the trainer has passed the last batch of the window that needs it, so the least-recently-used eviction
never drops a shard that is about to be read again (pinned files may take the cache past its budget when the
window holds more than the budget). Local files need no warming: sources whose files are local are skipped.
With ``num_workers`` the thread runs in the trainer's process and fills the cache folder the workers read
from (they find the files there); pins are per process, so give the cache a budget above the window.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

from fm_loader.mixture import Mixture
from fm_loader.storage import ShardCache, is_remote
from fm_loader.stream import GlobalStream

logger = logging.getLogger(__name__)

Position = tuple[int, int]  # (epoch, first global row of a batch)


class Prewarmer:
    """Fetches (and pins) the shards of upcoming batches; see the module docstring.

    Args:
        mixture: The loader's mixture.
        seed: The loader's seed.
        cache: The cache to fill.
        rows_ahead: Global rows past the trainer's position whose shards are fetched.
        global_batch_size: Rows per global batch.
        rank_rows: ``(first row of this rank inside a global batch, rows of this rank)``.
        positions: Yields the (epoch, start) of every batch from the trainer's current position on.
        consumer: Returns the trainer's current position (the next batch it will receive).
    """

    def __init__(
        self,
        mixture: Mixture,
        seed: int,
        cache: ShardCache,
        rows_ahead: int,
        global_batch_size: int,
        rank_rows: tuple[int, int],
        positions: Iterator[Position],
        consumer: Callable[[], Position],
    ) -> None:
        self.mixture = mixture
        self.stream = GlobalStream(
            mixture, seed
        )  # its own: the stream's caches are not shared across threads
        self.cache = cache
        self.batches_ahead = max(1, -(-rows_ahead // global_batch_size))
        self.rank_first, self.rank_rows = rank_rows
        self.positions = positions
        self.consumer = consumer
        self.pinned: dict[str, tuple[str, Position]] = {}  # uri -> (local path, last position needing it)
        self.warmed: list[Position] = []  # positions fetched, not yet passed by the trainer
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fm_loader-prewarm", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and release every pin it holds."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=10)
        for path, _ in self.pinned.values():
            self.cache.unpin(path)
        self.pinned.clear()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if not self.step():
                    self._stop.wait(0.005)
        except BaseException as exc:  # warming is an optimisation: readers fetch what it could not
            self.error = exc
            logger.warning("prewarm stopped: %s", exc)

    def step(self) -> bool:
        """Release what the trainer has passed, then fetch one more batch's shards if the window has room.

        Returns:
            True if a batch was warmed (more may follow at once), False if the window is full or the stream
            has ended.
        """
        now = self.consumer()
        for uri, (path, last) in list(self.pinned.items()):
            if last < now:
                self.cache.unpin(path)
                del self.pinned[uri]
        self.warmed = [p for p in self.warmed if p >= now]
        if len(self.warmed) >= self.batches_ahead:
            return False
        position = next(self.positions, None)
        while position is not None and position < now:  # the trainer got there first
            position = next(self.positions, None)
        if position is None:
            return False
        self._fetch(position)
        self.warmed.append(position)
        return True

    def _fetch(self, position: Position) -> None:
        epoch, start = position
        refs = self.stream.rows(epoch, start + self.rank_first, self.rank_rows)
        shards = {
            (int(s), int(h)) for s, h in zip(refs.source.tolist(), refs.shard.tolist(), strict=True) if s >= 0
        }
        for source, shard in sorted(shards):
            for uri in self.mixture.sources[source].shard_files(shard):
                if not is_remote(uri):
                    continue
                held = self.pinned.get(uri)
                path = held[0] if held else self.cache.get(uri, pin=True, ahead=True)
                self.pinned[uri] = (path, position)
