"""Worker -> trainer hand-over of batches through a reused ring of shared-memory slots.

torch's ``DataLoader`` sends each tensor of a batch through a fresh shared-memory segment and a file
descriptor passed over a socket, per tensor and per batch; for a batch of many tensors that costs more than
building it. Here each worker owns up to ``slots`` segments (created on first use, grown when a batch does
not fit), writes every tensor of a batch into one of them at aligned offsets, and sends only a small
:class:`ShmBatch` (segment name, offsets, shapes, dtypes, and the batch's non-tensor values) through the
``DataLoader``'s queue. The trainer's process maps each segment once, hands out tensors that are views of it
(no copy), and gives a slot back to its worker once none of those tensors is referenced any more (checked
at every hand-out, like :class:`fm_loader.batching.BufferPool`), through a flag array shared with the
workers. A worker that finds none of its slots free within a short wait sends the batch in a one-off
segment instead of blocking, so a trainer that keeps many batches alive never deadlocks the loader.

Segments are files under ``/dev/shm`` (else the temp folder), named after the ring; the trainer's process
unlinks each one as soon as it has mapped it, and removes any left over (a batch never received) when
iteration ends. Order and contents are the worker's batches exactly: only the transport changes.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import mmap
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)

_ALIGN = 64
_WAIT_S = 0.05  # how long a worker waits for a free slot before sending through a one-off segment
_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


@dataclass(frozen=True)
class ShmBatch:
    """What travels through the queue instead of a batch's tensors.

    Attributes:
        worker, slot: Whose slot holds the tensors (``slot == -1``: a one-off segment, not part of the ring).
        name: The segment's file name.
        size: Its size in bytes.
        tensors: ``(key, offset, shape, dtype name)`` of each tensor, in the batch's key order.
        rest: The batch's other values (caption strings ...), pickled as usual.
        order: Every key of the batch, in its order.
    """

    worker: int
    slot: int
    name: str
    size: int
    tensors: tuple[tuple[str, int, tuple[int, ...], str], ...]
    rest: dict[str, Any]
    order: tuple[str, ...]


def _map(name: str, size: int, create: bool) -> np.ndarray:
    path = os.path.join(_SHM_DIR, name)
    fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    try:
        if create:
            os.ftruncate(fd, size)
        mapped = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    return np.frombuffer(mapped, dtype=np.uint8)


def _unlink(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(_SHM_DIR, name))


class HandoverRing:
    """The shared part of a ring: made in the trainer's process before the workers start (picklable to them).

    Args:
        context: The multiprocessing context the workers are started with.
        workers: Worker processes.
        slots: Slots per worker (batches of one worker alive at once: queued, held by the trainer, in flight).
    """

    def __init__(self, context: Any, workers: int, slots: int) -> None:
        self.workers, self.slots = workers, slots
        self.prefix = f"fm_loader-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.busy = context.RawArray("b", workers * slots)  # 1: written by the worker, not yet given back

    def sender(self, worker: int) -> ShmSender:
        return ShmSender(self, worker)


def shm_handover_ring(context: Any, workers: int, slots: int) -> HandoverRing:
    """A ring of ``slots`` shared-memory slots for each of ``workers`` worker processes."""
    return HandoverRing(context, workers, slots)


class ShmSender:
    """The worker side: writes a batch's tensors into a free slot and returns its :class:`ShmBatch`."""

    def __init__(self, ring: HandoverRing, worker: int) -> None:
        self.ring, self.worker = ring, worker
        self._segments: dict[int, tuple[str, np.ndarray]] = {}
        self._made = 0

    def _new_segment(self, size: int) -> tuple[str, np.ndarray]:
        name = f"{self.ring.prefix}-w{self.worker}-{self._made}"
        self._made += 1
        return name, _map(name, size, create=True)

    def _free_slot(self) -> int:
        base = self.worker * self.ring.slots
        deadline = time.monotonic() + _WAIT_S
        while True:
            for slot in range(self.ring.slots):
                if not self.ring.busy[base + slot]:
                    return slot
            if time.monotonic() >= deadline:
                return -1
            time.sleep(0.0005)

    def send(self, batch: dict[str, Any]) -> ShmBatch:
        layout: list[tuple[str, int, tuple[int, ...], str]] = []
        tensors: list[torch.Tensor] = []
        rest: dict[str, Any] = {}
        size = 0
        for key, value in batch.items():
            if isinstance(value, torch.Tensor) and value.device.type == "cpu":
                layout.append((key, size, tuple(value.shape), str(value.dtype).removeprefix("torch.")))
                tensors.append(value)
                size += -(-value.numel() * value.element_size() // _ALIGN) * _ALIGN
            else:
                rest[key] = value
        size = max(size, _ALIGN)
        slot = self._free_slot()
        if slot < 0:
            name, memory = self._new_segment(size)  # one-off: the trainer keeps all slots alive
        else:
            found = self._segments.get(slot)
            if found is None or found[1].nbytes < size:
                found = self._new_segment(size)
                self._segments[slot] = found
            name, memory = found
            self.ring.busy[self.worker * self.ring.slots + slot] = 1
        for (_key, offset, _shape, _dtype), tensor in zip(layout, tensors, strict=True):
            nbytes = tensor.numel() * tensor.element_size()
            target = memory[offset : offset + nbytes]
            try:
                # numpy's copy: torch's copy_ into mapped memory costs milliseconds per call (measured)
                np.copyto(target.view(tensor.numpy().dtype).reshape(tensor.shape), tensor.numpy())
            except TypeError:  # a dtype numpy lacks (bfloat16 ...)
                torch.from_numpy(target).view(tensor.dtype).view(tensor.shape).copy_(tensor)
        return ShmBatch(self.worker, slot, name, int(memory.nbytes), tuple(layout), rest, tuple(batch.keys()))

    def close(self) -> None:
        self._segments.clear()


class ShmReceiver:
    """The trainer's side: turns :class:`ShmBatch` records back into batches of tensors viewing the slots."""

    def __init__(self, ring: HandoverRing) -> None:
        self.ring = ring
        self._mapped: dict[tuple[int, int], tuple[str, np.ndarray]] = {}
        self._held: list[tuple[int, list[np.ndarray]]] = []  # (flag index, the arrays handed out)

    def _give_back(self) -> None:
        """Give back every slot none of whose tensors is referenced any more."""
        kept = []
        for flag, arrays in self._held:
            # arrays[0] is a sentinel nothing else references: its count is the baseline (the list, the loop's
            # name, getrefcount's argument); a live tensor over another array adds one to that array's count
            counts = [sys.getrefcount(a) for a in arrays]
            if max(counts) <= counts[0]:
                self.ring.busy[flag] = 0
            else:
                kept.append((flag, arrays))
        self._held = kept

    def _memory(self, shipped: ShmBatch) -> np.ndarray:
        if shipped.slot < 0:
            memory = _map(shipped.name, shipped.size, create=False)
            _unlink(shipped.name)
            return memory
        key = (shipped.worker, shipped.slot)
        found = self._mapped.get(key)
        if found is None or found[0] != shipped.name:
            found = (shipped.name, _map(shipped.name, shipped.size, create=False))
            _unlink(shipped.name)
            self._mapped[key] = found
        return found[1]

    def receive(self, shipped: ShmBatch) -> dict[str, Any]:
        """The batch ``shipped`` describes; its tensors view the slot until the trainer drops them."""
        self._give_back()
        memory = self._memory(shipped)
        values: dict[str, Any] = dict(shipped.rest)
        arrays: list[np.ndarray] = [np.empty(0, dtype=np.uint8)]
        for key, offset, shape, dtype in shipped.tensors:
            torch_dtype = getattr(torch, dtype)
            nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=torch_dtype).element_size()
            array = memory[offset : offset + nbytes]
            arrays.append(array)
            values[key] = torch.from_numpy(array).view(torch_dtype).view(shape)
        if shipped.slot >= 0:
            self._held.append((shipped.worker * self.ring.slots + shipped.slot, arrays))
        return {key: values[key] for key in shipped.order}

    def close(self) -> None:
        """Forget the mappings (handed-out tensors keep theirs) and remove segments never received."""
        self._mapped.clear()
        self._held.clear()
        for path in glob.glob(os.path.join(_SHM_DIR, f"{self.ring.prefix}-*")):
            _unlink(os.path.basename(path))
        logger.debug("hand-over ring %s closed", self.ring.prefix)
