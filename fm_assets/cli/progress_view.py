"""How `fm run` shows progress: a live bar on a terminal, and without one (CI, `| tee`, a log file) a
plain line every ``LINE_EVERY_SECONDS`` and at each batch's end, so logs stay readable."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

LINE_EVERY_SECONDS = 15.0


class ProgressView(Protocol):
    def describe(self, text: str) -> None: ...

    def advance(self) -> None: ...


class LiveBar:
    def __init__(self, bar: Progress, total: int) -> None:
        self.bar = bar
        self.task = bar.add_task("stages", total=total)

    def describe(self, text: str) -> None:
        self.bar.update(self.task, description=text)

    def advance(self) -> None:
        self.bar.advance(self.task)


class PlainLines:
    """One line now and then: ``[fm run 00:42] 14/36 stages · <batch> · <stage>``."""

    def __init__(self, console: Console, total: int, every: float = LINE_EVERY_SECONDS) -> None:
        self.console, self.total, self.every = console, total, every
        self.done = 0
        self.text = "starting"
        self.started = self.last = time.monotonic()

    def _line(self) -> None:
        elapsed = int(time.monotonic() - self.started)
        self.console.print(
            f"[fm run {elapsed // 60:02d}:{elapsed % 60:02d}] {self.done}/{self.total} stages · {self.text}",
            highlight=False,
            markup=False,
        )
        self.last = time.monotonic()

    def describe(self, text: str) -> None:
        self.text = text
        if text == "dataset release" or time.monotonic() - self.last >= self.every:
            self._line()

    def advance(self) -> None:
        self.done += 1
        if self.done == self.total or time.monotonic() - self.last >= self.every:
            self._line()


@contextmanager
def progress_view(console: Console, total: int) -> Iterator[ProgressView]:
    if not console.is_terminal:
        yield PlainLines(console, total)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        yield LiveBar(bar, total)
