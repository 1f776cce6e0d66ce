"""Batches handed out as device tensors: staged in pinned host memory, copied on a side stream, 2 deep.

:class:`DeviceFeeder` wraps any iterator of batches (dicts whose tensor values go to the device; other values,
such as caption strings, pass through unchanged). Each host batch is copied into a ring of reused pinned
buffers (one ring per key, shape and dtype, so a bucketed media loader keeps one per bucket shape), then
copied to the device with ``non_blocking=True`` on a stream of its own; up to ``depth`` batches are in flight
ahead of the one handed out. The trainer's stream waits on the copy's event before it touches a batch, and
the device tensors are recorded on that stream so the caching allocator does not reuse them early.

Order and content are the host iterator's: the feeder neither reorders nor drops, so the loader's stream,
state and resume guarantees are unchanged, and token batches are bit-identical to the CPU path. A pinned
buffer is written again only after the copy out of it has finished (its event is waited on first).

The transfer itself is behind a small :class:`Transfer` interface: :class:`CudaTransfer` on a GPU, and
:class:`HostTransfer` (plain copies, fences that are already done) where there is none, which is how the
ring rotation and ordering are tested on machines without CUDA.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from fm_loader.prefetch import prefetched

logger = logging.getLogger(__name__)

DEFAULT_DEPTH = 2


class Fence(Protocol):
    """Something that says when an asynchronous copy is finished."""

    def synchronize(self) -> None: ...


class Transfer(Protocol):
    """How host batches reach the device: pinned staging buffers, an asynchronous copy, its fence."""

    def empty_staging(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor: ...

    def copy_to_device(self, staged: torch.Tensor) -> torch.Tensor: ...

    def fence(self) -> Fence: ...

    def hand_over(self, fence: Fence, tensors: list[torch.Tensor]) -> None: ...

    def side_stream(self) -> contextlib.AbstractContextManager[Any]: ...


class _DoneFence:
    def synchronize(self) -> None:
        return None


class HostTransfer:
    """No accelerator: staging buffers are ordinary memory and the 'device' copy is a clone."""

    def __init__(self) -> None:
        self.device = torch.device("cpu")

    def empty_staging(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype)

    def copy_to_device(self, staged: torch.Tensor) -> torch.Tensor:
        return staged.clone()

    def fence(self) -> Fence:
        return _DoneFence()

    def hand_over(self, fence: Fence, tensors: list[torch.Tensor]) -> None:
        fence.synchronize()

    def side_stream(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


class CudaTransfer:
    """Pinned staging buffers and copies on a dedicated CUDA stream of ``device``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device=device)

    def empty_staging(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, pin_memory=True)

    def copy_to_device(self, staged: torch.Tensor) -> torch.Tensor:
        with torch.cuda.stream(self.stream):
            return staged.to(self.device, non_blocking=True)

    def fence(self) -> Fence:
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def hand_over(self, fence: Fence, tensors: list[torch.Tensor]) -> None:
        consumer = torch.cuda.current_stream(self.device)
        consumer.wait_event(fence)  # type: ignore[arg-type]
        for tensor in tensors:
            tensor.record_stream(consumer)

    def side_stream(self) -> contextlib.AbstractContextManager[Any]:
        """Work queued inside this context (the copies, a GPU decode) runs on the copy stream."""
        return torch.cuda.stream(self.stream)


def resolve_device(device: str | torch.device | None) -> torch.device | None:
    """The device batches go to, or None for plain host batches.

    ``"auto"`` is the current CUDA device when there is one, else the host (with one log line saying so);
    an explicit CUDA device without CUDA is an error rather than a silent fall back to the CPU.
    """
    if device is None:
        return None
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        logger.info("fm_loader: device='auto' and no CUDA device: batches stay in host memory")
        return None
    resolved = torch.device(device)
    if resolved.type == "cpu":
        return None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={str(device)!r} asked for, but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}); use device='auto' to fall back to host memory"
        )
    return resolved


@dataclass
class _Slot:
    buffer: torch.Tensor
    fence: Fence | None = None


MAX_RINGS = 64  # staging rings kept (every bucket shape of a bucketed loader; batches padded per batch vary)


@dataclass
class StagingRing:
    """``slots`` reused staging buffers per (key, shape, dtype); a slot is rewritten only after its copy ended.

    At most ``max_rings`` rings are kept, the least recently used dropped first (after its copies ended): a
    kind whose batches are padded to their own longest sample (audio without ``audio_max_frames``) has a new
    shape nearly every batch, and its pinned buffers would otherwise pile up without bound.
    """

    transfer: Transfer
    slots: int
    max_rings: int = MAX_RINGS
    _rings: dict[tuple[str, torch.Size, torch.dtype], list[_Slot]] = field(default_factory=dict)
    _next: dict[tuple[str, torch.Size, torch.dtype], int] = field(default_factory=dict)

    def _ring(self, ring_key: tuple[str, torch.Size, torch.dtype]) -> list[_Slot]:
        """The ring of ``ring_key``, now the most recently used; a new one drops the least recently used."""
        ring = self._rings.pop(ring_key, None)
        if ring is None:
            ring = []
            while len(self._rings) >= self.max_rings:
                oldest = next(iter(self._rings))
                for slot in self._rings.pop(oldest):
                    if slot.fence is not None:
                        slot.fence.synchronize()  # its buffer is freed only once no copy reads it
                self._next.pop(oldest, None)
        self._rings[ring_key] = ring
        return ring

    def stage(self, key: str, tensor: torch.Tensor) -> _Slot:
        ring_key = (key, tensor.shape, tensor.dtype)
        ring = self._ring(ring_key)
        position = self._next.get(ring_key, 0)
        if len(ring) < self.slots:
            slot = _Slot(self.transfer.empty_staging(tensor.shape, tensor.dtype))
            ring.append(slot)
        else:
            slot = ring[position]
            if slot.fence is not None:
                slot.fence.synchronize()  # the copy out of this buffer must be finished before it is rewritten
        self._next[ring_key] = (position + 1) % self.slots
        slot.buffer.copy_(tensor)
        return slot

    def buffers(self) -> int:
        return sum(len(ring) for ring in self._rings.values())


Prepare = Callable[[dict[str, Any], Any], dict[str, Any]]
_Launched = tuple[dict[str, Any], Any, Fence, list[torch.Tensor]]


class DeviceFeeder(Iterator[Any]):
    """Iterates ``batches`` as device batches, ``depth`` copies in flight ahead of the consumer.

    Args:
        batches: Host batches; with ``tagged``, ``(batch, tag)`` pairs whose tag travels along unchanged (the
            loader's step and build record, so the position advances when the trainer receives the batch).
        transfer: How batches reach the device.
        depth: Batches in flight ahead of the one handed out.
        prepare: Called with ``(host batch, tag)`` on the side stream before the copy (e.g. a GPU decode); it
            returns the batch to send, where tensors already on the device pass through uncopied.
        tagged: Items are ``(batch, tag)`` pairs and so is what is yielded.
        threaded: Stage, prepare and launch the copies in a background thread (the consumer's thread only
            makes its stream wait on each batch's copy), so the staging copies and a GPU decode's host work do
            not take the training loop's time. An error is raised at the batch it belongs to either way.
    """

    def __init__(
        self,
        batches: Iterable[Any],
        transfer: Transfer,
        depth: int = DEFAULT_DEPTH,
        prepare: Prepare | None = None,
        tagged: bool = False,
        threaded: bool = False,
    ) -> None:
        if depth < 1:
            raise ValueError(f"device prefetch depth must be >= 1, got {depth}")
        self._source = iter(batches)
        self._transfer = transfer
        self._depth = depth
        self._prepare = prepare
        self._tagged = tagged
        # one slot more than the batches in flight: the one being staged while `depth` are still copying (one
        # more with a thread, whose queue and the batch it stages are both ahead)
        self._ring = StagingRing(transfer, slots=depth + (2 if threaded else 1))
        self._in_flight: deque[tuple[Any, Any, Any, list[torch.Tensor]]] = deque()
        self._exhausted = False
        self._launched: Generator[_Launched, None, None] | None = None
        if threaded:
            self._launched = prefetched(self._launches(), max(1, depth - 1), name="fm_loader-device")

    def _launches(self) -> Iterator[_Launched]:
        for item in self._source:
            host, tag = item if self._tagged else (item, None)
            yield self._launch(host, tag)

    def _launch(self, host: dict[str, Any], tag: Any) -> _Launched:
        batch: dict[str, Any] = {}
        staged: list[_Slot] = []
        on_device: list[torch.Tensor] = []
        with self._transfer.side_stream():
            if self._prepare is not None:
                host = self._prepare(host, tag)
            for key, value in host.items():
                if isinstance(value, torch.Tensor) and value.device.type == "cpu":
                    slot = self._ring.stage(key, value)
                    batch[key] = self._transfer.copy_to_device(slot.buffer)
                    staged.append(slot)
                    on_device.append(batch[key])
                else:
                    batch[key] = value
                    if isinstance(value, torch.Tensor):  # made on the device by `prepare`
                        on_device.append(value)
            fence = self._transfer.fence()
        for slot in staged:
            slot.fence = fence
        return batch, tag, fence, on_device

    def __next__(self) -> Any:
        if self._launched is not None:
            batch, tag, fence, on_device = next(self._launched)
            self._transfer.hand_over(fence, on_device)
            return (batch, tag) if self._tagged else batch
        while not self._exhausted and len(self._in_flight) < self._depth:
            try:
                item = next(self._source)
            except StopIteration:
                self._exhausted = True
                break
            host, tag = item if self._tagged else (item, None)
            try:
                self._in_flight.append(self._launch(host, tag))
            except Exception as exc:  # raised when the consumer reaches this batch, not while looking ahead
                self._in_flight.append((exc, None, None, []))
                self._exhausted = True
        if not self._in_flight:
            raise StopIteration
        batch, tag, fence, on_device = self._in_flight.popleft()
        if isinstance(batch, Exception):
            raise batch
        self._transfer.hand_over(fence, on_device)
        return (batch, tag) if self._tagged else batch

    def close(self) -> None:
        """Close the source (stops a prefetch thread behind it) and drop the batches in flight."""
        if self._launched is not None:
            self._launched.close()  # joins the staging thread before the source is closed here
        self._in_flight.clear()
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    @property
    def staging_buffers(self) -> int:
        """Staging buffers held (at most the ring's slots x distinct (key, shape, dtype), kept to ``MAX_RINGS``)."""
        return self._ring.buffers()


def to_device(
    batches: Iterable[dict[str, Any]], device: str | torch.device | None, depth: int = DEFAULT_DEPTH
):
    """``batches`` unchanged when ``device`` resolves to the host, else a :class:`DeviceFeeder` onto it."""
    resolved = resolve_device(device)
    if resolved is None:
        return iter(batches)
    return DeviceFeeder(batches, CudaTransfer(resolved), depth=depth)
