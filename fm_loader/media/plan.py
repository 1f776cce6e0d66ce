"""Which samples form each global batch: a pure function of (global stream, bucket of each sample, G, epoch).

The global stream of samples (:class:`fm_loader.stream.GlobalStream`: seeded shard permutation per epoch,
seeded permutation inside windows of shards) is the text loader's, unchanged. On top of it:

* :class:`BucketPlanner` (image-text): walk the epoch's stream in order, append each sample to its bucket's
  queue, and emit a global batch of ``G`` samples whenever a queue reaches ``G``. At the end of the epoch
  every non-empty queue, in bucket order, is emitted as one final batch padded to ``G`` with padding samples
  (position -1, ``valid`` false): nothing is dropped, nothing crosses into the next epoch, shapes never change.
* :class:`FixedPlanner` (audio-text): global batch ``k`` is stream positions ``[kG, (k+1)G)``, the last one
  padded, exactly as text rows.

A position in the plan is ``(epoch, batches emitted, samples consumed)``. To resume at batch ``k`` the planner
replays the epoch's bucket ids from its start up to the position (no media is read: only sample indexes,
about 64 bytes a sample), rebuilding the queues exactly. That costs O(samples consumed in the epoch) in
numpy work plus one index read per shard visited, about a second per million samples; it is independent of
the world size, which is why restoring under any world size continues the identical batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from fm_loader.stream import GlobalStream, RowRefs

# columns of PlannedBatch.refs
POSITION, SOURCE, SHARD, ROW, SAMPLE_ID = range(5)
_PAD_REF = np.array([-1, -1, 0, 0, -1], dtype=np.int64)


@dataclass(frozen=True)
class PlannedBatch:
    """One global batch of the plan.

    Attributes:
        epoch: Its epoch.
        index: Global batches of this epoch emitted before it.
        consumed: Stream positions of the epoch consumed once it has been emitted.
        bucket: Its aspect-ratio bucket; -1 for audio.
        refs: ``(G, 5)`` int64: stream position, source, shard, row in the shard, sample id; a padding sample
            has position, source and sample id -1.
    """

    epoch: int
    index: int
    consumed: int
    bucket: int
    refs: np.ndarray

    @property
    def valid(self) -> np.ndarray:
        return self.refs[:, SOURCE] >= 0


def _table(start: int, refs: RowRefs) -> np.ndarray:
    n = len(refs.source)
    return np.stack([np.arange(start, start + n), refs.source, refs.shard, refs.row, refs.sample_id], axis=1)


def _padded(rows: np.ndarray, size: int) -> np.ndarray:
    out = np.tile(_PAD_REF, (size, 1))
    out[: len(rows)] = rows
    return out


class PlanMismatchError(ValueError):
    """A saved position does not fall on a batch boundary of this plan (other data, buckets or batch size)."""


class BucketPlanner:
    """Image-text plan: every global batch from one bucket (see the module docstring)."""

    def __init__(
        self,
        stream: GlobalStream,
        bucket_ids: Callable[[RowRefs], np.ndarray],
        num_buckets: int,
        batch_size: int,
        chunk: int = 8192,
    ) -> None:
        """Args:
        stream: The global stream of samples.
        bucket_ids: Bucket of every sample of a slice of the stream (read from the sample indexes).
        num_buckets: Number of buckets.
        batch_size: ``G``, samples per global batch.
        chunk: Stream positions looked up at once (memory vs. calls; does not change the plan).
        """
        self.stream, self.bucket_ids = stream, bucket_ids
        self.num_buckets, self.batch_size, self.chunk = num_buckets, batch_size, chunk

    def epoch_batches(
        self, epoch: int, skip: int = 0, expect_consumed: int | None = None
    ) -> Iterator[PlannedBatch]:
        """The epoch's global batches in order, starting with batch ``skip``.

        Args:
            epoch: The epoch.
            skip: Batches already emitted (replayed from the bucket ids, not yielded).
            expect_consumed: If given, the stream positions consumed after batch ``skip - 1`` must equal it.

        Raises:
            PlanMismatchError: ``skip`` is past the epoch's batches, or ``expect_consumed`` does not match.
        """
        total, size = self.stream.epoch_rows, self.batch_size
        queues = [np.zeros((0, 5), np.int64) for _ in range(self.num_buckets)]
        emitted, consumed = 0, 0

        def check_resume() -> None:
            if emitted == skip and expect_consumed is not None and consumed != expect_consumed:
                raise PlanMismatchError(
                    f"batch {skip} of epoch {epoch} starts after {consumed} samples, the state says "
                    f"{expect_consumed}: it was saved for other data, buckets or batch size"
                )

        check_resume()
        for start in range(0, total, self.chunk):
            refs = self.stream.rows(epoch, start, min(self.chunk, total - start))
            table, ids = _table(start, refs), self.bucket_ids(refs)
            ready: list[tuple[int, int, np.ndarray]] = []
            for bucket in np.unique(ids).tolist():
                queue = np.concatenate([queues[bucket], table[ids == bucket]])
                full = len(queue) // size
                for i in range(full):  # a batch is emitted when its last sample arrives
                    rows = queue[i * size : (i + 1) * size]
                    ready.append((int(rows[-1, POSITION]), bucket, rows))
                queues[bucket] = queue[full * size :]
            for closing, bucket, rows in sorted(ready, key=lambda item: item[0]):
                consumed = closing + 1
                if emitted >= skip:
                    yield PlannedBatch(epoch, emitted, consumed, bucket, rows)
                emitted += 1
                check_resume()
        consumed = total
        for bucket, queue in enumerate(queues):
            if len(queue):
                if emitted >= skip:
                    yield PlannedBatch(epoch, emitted, total, bucket, _padded(queue, size))
                emitted += 1
                check_resume()
        if skip > emitted:
            raise PlanMismatchError(
                f"epoch {epoch} has {emitted} global batches, the state says {skip} were emitted"
            )


class FixedPlanner:
    """Audio-text plan: global batch ``k`` is stream positions ``[kG, (k+1)G)``, the last one padded."""

    def __init__(self, stream: GlobalStream, batch_size: int) -> None:
        self.stream, self.batch_size = stream, batch_size

    def epoch_batches(
        self, epoch: int, skip: int = 0, expect_consumed: int | None = None
    ) -> Iterator[PlannedBatch]:
        """The epoch's global batches in order, starting with batch ``skip`` (see :class:`BucketPlanner`)."""
        total, size = self.stream.epoch_rows, self.batch_size
        batches = -(-total // size)
        if skip > batches or (expect_consumed is not None and expect_consumed != min(skip * size, total)):
            raise PlanMismatchError(
                f"epoch {epoch} has {batches} global batches of {size}; the state (batch {skip}, "
                f"{expect_consumed} samples consumed) was saved for other data or another batch size"
            )
        for k in range(skip, batches):
            start = k * size
            refs = self.stream.rows(epoch, start, size)
            table = _table(start, refs)
            table[refs.source < 0] = _PAD_REF
            yield PlannedBatch(epoch, k, min(start + size, total), -1, table)
