"""Batches built in torch ``DataLoader`` worker processes for :class:`fm_loader.Loader`.

Worker ``w`` of ``n`` builds batches ``w, w + n, ...`` of the schedule with a loader rebuilt from the
parent's configuration (no device, no workers of its own); the DataLoader's in-order round robin keeps the
global order. Each batch's tensors come back through a reused ring of shared-memory slots
(:mod:`fm_loader.handover`) rather than pickled, with the worker's build time and cache counters. Workers may
run at a lower CPU priority than the trainer (``worker_nice``), so that they get the CPU the trainer's thread
leaves rather than slowing its step.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import Any

import torch

from fm_loader.builders.base import Built, Step
from fm_loader.handover import ShmReceiver, shm_handover_ring
from fm_loader.metrics import cache_delta

logger = logging.getLogger(__name__)

_Item = tuple[Step, Built, dict[str, Any]]


def lower_priority(nice: int, worker_id: int) -> None:
    """A DataLoader ``worker_init_fn``: this worker process's CPU priority ``nice`` steps below its parent's."""
    if nice <= 0:
        return
    try:
        os.nice(nice)
    except (AttributeError, OSError) as exc:  # no os.nice on Windows; a sandbox may refuse it
        logger.info("fm_loader: worker %d keeps its CPU priority (%s)", worker_id, exc)


def worker_items(
    config: dict[str, Any],
    schedule: list[Step],
    num_workers: int,
    *,
    prefetch: int,
    shm: bool,
    slots: int,
    nice: int = 0,
) -> Generator[_Item, None, None]:
    """(step, its batch, its build info) for every step of ``schedule``, in order, built by the workers.

    ``slots`` is how many of a worker's batches may be alive at once (queued, in flight to the device, held
    by the trainer): the size of its shared-memory ring. ``nice``: the workers' priority below this process's.
    """
    if not schedule:
        return
    context = torch.multiprocessing.get_context()
    ring = shm_handover_ring(context, num_workers, slots) if shm else None
    data = torch.utils.data.DataLoader(
        WorkerBatches(config, [step.work for step in schedule], ring),
        batch_size=None,
        num_workers=num_workers,
        prefetch_factor=max(1, prefetch),
        persistent_workers=False,
        multiprocessing_context=context,
        worker_init_fn=functools.partial(lower_priority, nice),
    )
    receiver = ShmReceiver(ring) if ring is not None else None
    it = iter(data)
    try:
        for step in schedule:
            built, info = next(it)
            if receiver is not None:
                built = replace(built, batch=receiver.receive(built.batch))
            yield step, built, info
    finally:
        del it  # shuts the workers down
        if receiver is not None:
            receiver.close()


class WorkerBatches(torch.utils.data.IterableDataset):
    """Runs inside DataLoader workers: worker ``w`` builds every ``num_workers``-th batch of the schedule."""

    def __init__(self, config: dict[str, Any], schedule: list[Any], ring: Any = None) -> None:
        self.config, self.schedule, self.ring = config, schedule, ring

    def __iter__(self) -> Iterator[tuple[Built, dict[str, Any]]]:
        """Yields (the built batch, its build time and the worker cache's counters since the last one)."""
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        from fm_loader.loader import Loader  # the worker's own loader (imported here: loader imports this)

        local = Loader(**self.config)
        sender = self.ring.sender(wid) if self.ring is not None else None
        try:
            before = replace(local.cache.stats)
            for work in self.schedule[wid::nw]:
                t0 = time.monotonic()
                built = local._builder.build(work)
                if sender is not None:
                    built = replace(built, batch=sender.send(built.batch))
                built_at = time.monotonic()
                now = replace(local.cache.stats)
                yield (
                    built,
                    {"built_at": built_at, "build_s": built_at - t0, "cache": cache_delta(now, before)},
                )
                before = now
        finally:
            if sender is not None:
                sender.close()
            local.close()
