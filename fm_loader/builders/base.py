"""What every batch builder gives the loader core: the steps of the stream, and one batch per step."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from fm_loader.state import StateSpec
from fm_loader.storage import ShardCache

if TYPE_CHECKING:
    from fm_loader.loader import Loader


@dataclass(frozen=True)
class Step:
    """One global batch of the plan.

    Attributes:
        epoch: Its epoch.
        work: What :meth:`BatchBuilder.build` needs to build this rank's part (picklable: it travels to workers).
        after: The position once it is handed out: ``(epoch, position values in StateSpec.position order)``.
    """

    epoch: int
    work: Any
    after: tuple[int, tuple[int, ...]]


@dataclass
class Built:
    """One built batch and what the metrics count of it."""

    batch: dict[str, Any]
    rows: int
    tokens: int
    bytes: int = 0
    corrupt: int = 0  # rows / samples made padding (corrupt, undecodable or in a missing shard)
    lost: int = 0  # of those, the ones whose shard could not be opened


class BatchBuilder(ABC):
    """Turns a kind's rows into batches for the :class:`~fm_loader.loader.Loader` that owns it.

    Attributes:
        state: The layout of this kind's state.
        cache: The local cache of remote files.
    """

    state: ClassVar[StateSpec]
    cache: ShardCache

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.cache = loader.cache

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Identifies the plan: a state is continued only by a loader with the same fingerprint."""

    @property
    @abstractmethod
    def epoch_rows(self) -> int:
        """Rows (samples) in one epoch of the global stream."""

    @abstractmethod
    def steps(self, epoch: int, position: tuple[int, ...], epochs: int | None) -> Iterator[Step]:
        """The global batches from a position to the end of ``epochs`` (endless when ``None``)."""

    @abstractmethod
    def build(self, work: Any) -> Built:
        """This rank's part of one global batch."""

    def pins(self) -> dict[str, int]:
        """State keys that must match this loader's values (see :attr:`StateSpec.pinned`)."""
        return {}

    def wrap(self, batches: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """A hook around the iteration (the packed-token prewarmer); the batches unchanged by default."""
        return batches

    @property
    def image_decode_mode(self) -> str:
        """Where this builder's images are decoded (``"cpu"`` or ``"gpu"``; ``"cpu"`` for kinds without images)."""
        return "cpu"

    def device_stage(self, batch: dict[str, Any], item: Any) -> dict[str, Any]:
        """Work done in the trainer's process on the copy stream before a batch goes to the device (a GPU
        decode); ``item`` is the loader's ``(step, Built, info)``. The batch unchanged by default."""
        return batch

    def named_metrics(self, snapshot: dict[str, float]) -> dict[str, float]:
        """The kind's own names for the shared counters (e.g. ``samples`` for ``rows``)."""
        return snapshot

    def close(self) -> None:  # noqa: B027 - optional hook
        """Close open shards."""
