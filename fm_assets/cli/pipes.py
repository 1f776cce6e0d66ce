"""`fm` in a pipe or a log: the two consoles every command prints through, tables kept wide without a
terminal, and a quiet stop with the usual exit status (128 + SIGPIPE) when the reader goes away
(`fm rejects B | head`).

``out`` (stdout) carries a command's result: what a script captures (ids, tables, reports, JSON, the version
released). ``err`` (stderr) carries everything about getting there: progress, notes, warnings and errors."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

# Without a terminal (CI, `| tee`, a log file) rich would squeeze tables to 80 columns: give them room instead.
PIPE_WIDTH = 240
SIGPIPE_EXIT = 141


# The one place fm renders text to a terminal: markup is never parsed, so a batch id, file name, --reason or
# --reviewer holding ``[/bold]`` or ``[link=...]`` prints as written. A line may open with one of these style tags;
# the text up to its last closing tag takes that style (as literal text), the rest prints plain.
LINE_STYLES = ("red", "yellow", "green", "bold", "cyan")
_LEADING_STYLE = re.compile(r"^\[(" + "|".join(LINE_STYLES) + r")\]")


def literal(text: str) -> Text:
    """``text`` as rich ``Text`` with no markup parsed (see ``LINE_STYLES`` for the one leading style tag)."""
    match = _LEADING_STYLE.match(text)
    if match is None:
        return Text(text)
    style, close = match.group(1), f"[/{match.group(1)}]"
    end = text.rfind(close)
    if end < match.end():
        return Text(text[match.end() :], style=style)
    return Text.assemble((text[match.end() : end], style), text[end + len(close) :])


class PipeConsole(Console):
    """A rich console whose closed pipe surfaces as ``BrokenPipeError`` (rich's own handling exits with 1) and
    that never parses markup (strings it prints, table cells included, are literal text: ``literal``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(literal(o) if isinstance(o, str) else o for o in objects), **kwargs)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def pipe_console(*, stderr: bool = False, soft_wrap: bool = False) -> PipeConsole:
    """A console on stdout (or stderr) that follows ``sys.stdout`` when tests or callers swap it."""
    stream = sys.stderr if stderr else sys.stdout
    return PipeConsole(stderr=stderr, soft_wrap=soft_wrap, width=None if stream.isatty() else PIPE_WIDTH)


def reader_left() -> int:
    """Point stdout and stderr at /dev/null (Python's exit flush cannot fail again) and return 141."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    return SIGPIPE_EXIT


out = pipe_console()  # results
err = pipe_console(stderr=True, soft_wrap=True)  # progress, warnings, errors
