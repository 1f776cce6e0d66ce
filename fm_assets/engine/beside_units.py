"""Driver work that runs while a stage's units run, instead of before them.

A stage's ``prepare`` decides what its units need; some of what it computes is only needed by ``complete``
(near_dedup's band index of the kept documents: 0.2-0.3 s of driver time on a 300 MB batch). That work can
run on a driver thread while the units run on the workers, where the driver would otherwise only wait:
``prepare`` hands it to :func:`run_beside_units`, and ``run.run_stage`` starts it once ``prepare`` returned
and waits for it before ``complete`` (whose outputs may rely on it). If the units fail, the work is still
waited for, so nothing writes into the stage's output after the stage has failed. Outside a stage run (a
test calling ``prepare`` itself) the work runs at once, as it would have without this module.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar

log = logging.getLogger(__name__)

_PENDING: ContextVar[list[Callable[[], object]] | None] = ContextVar("beside_units", default=None)


def run_beside_units(work: Callable[[], object]) -> None:
    """Run ``work`` on a driver thread while this stage's units run; ``complete`` runs after it finished,
    and its error fails the stage. ``work`` must not write anything the units read. Outside a stage run it
    runs now."""
    pending = _PENDING.get()
    if pending is None:
        work()
        return
    pending.append(work)


class BesideUnits:
    """The work one stage run collected (see :func:`beside_units`)."""

    def __init__(self) -> None:
        self.work: list[Callable[[], object]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future[None] | None = None

    def start(self) -> None:
        """Start what ``prepare`` handed over, one item after another on one thread."""
        if not self.work or self._future is not None:
            return
        work = list(self.work)

        def run_all() -> None:
            for item in work:
                item()

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="beside-units")
        self._future = self._pool.submit(run_all)

    def wait(self) -> None:
        """Block until the work finished (nothing to do when it was never started); raise its error."""
        if self._future is None:
            return
        try:
            self._future.result()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


@contextlib.contextmanager
def beside_units(label: str) -> Iterator[BesideUnits]:
    """The scope of one stage run: :func:`run_beside_units` calls inside it are collected on the yielded
    object; leaving the scope waits for whatever was started (its error is logged when the block already
    raised one, raised otherwise)."""
    collected = BesideUnits()
    token = _PENDING.set(collected.work)
    try:
        yield collected
    except BaseException:
        try:
            collected.wait()
        except Exception:
            log.warning("%s: work beside the units failed too", label, exc_info=True)
        raise
    else:
        collected.wait()
    finally:
        _PENDING.reset(token)
