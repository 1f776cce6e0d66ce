"""Run a generator ahead of its consumer in a background thread, with a bounded queue.

The loader builds batches this way when it has no worker processes. Pillow and libsndfile release the GIL while they decode and resize, so building the next batches in a thread
overlaps their decode with the trainer's step even without worker processes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterable
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def prefetched(items: Iterable[T], depth: int, name: str = "fm_loader-prefetch") -> Generator[T, None, None]:
    """Yield ``items`` in order while a thread produces up to ``depth`` of them ahead.

    An exception raised while producing is raised here, at the item where it happened. Closing the returned
    generator (or dropping it) stops the thread after the item it is producing.
    """
    ready: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)

    worker = threading.Thread(target=produce, name=name, daemon=True)
    worker.start()
    try:
        while True:
            item = ready.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join(timeout=5)
