"""Stage progress: a listener hook for an in-process caller (the ``fm`` CLI) and the per-unit progress of a
stage run - a tqdm bar on a terminal, otherwise (CI, a pipe, the Dagster daemon) a log line now and then."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

Listener = Callable[[str, str, str, dict[str, Any]], None]  # (event, stage, batch, info)
_listeners: list[Listener] = []
LOG_EVERY_SECONDS = 30.0


def add_listener(listener: Listener) -> None:
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def emit(event: str, stage: str, batch: str, info: dict[str, Any] | None = None) -> None:
    for listener in list(_listeners):
        listener(event, stage, batch, info or {})


class UnitProgress(Protocol):
    def update(self, n: int = 1) -> Any: ...

    def close(self) -> None: ...


class LoggedProgress:
    """``<desc>: 12/40 units (30%), 95 s`` logged at most every ``every`` seconds and once at the end (only when
    a line was logged before it: short runs stay silent)."""

    def __init__(self, total: int, desc: str, every: float = LOG_EVERY_SECONDS) -> None:
        self.total, self.desc, self.every = total, desc, every
        self.done = 0
        self.logged = False
        self.started = self.last = time.monotonic()

    def _log(self) -> None:
        percent = 100 * self.done // self.total if self.total else 100
        elapsed = time.monotonic() - self.started
        logger.info("%s: %d/%d units (%d%%), %.0f s", self.desc, self.done, self.total, percent, elapsed)
        self.last, self.logged = time.monotonic(), True

    def update(self, n: int = 1) -> None:
        self.done += n
        if time.monotonic() - self.last >= self.every:
            self._log()

    def close(self) -> None:
        if self.logged:
            self._log()


def unit_progress(total: int, desc: str, bars: bool) -> UnitProgress:
    """A live bar when ``bars`` (``Settings.progress``: on a terminal by default), else periodic log lines."""
    if bars:
        return tqdm(total=total, desc=desc, unit="unit", leave=False)
    return LoggedProgress(total, desc)
