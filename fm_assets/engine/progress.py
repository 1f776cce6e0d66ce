"""A tiny listener hook so an in-process caller (the ``fm`` CLI) can show stage progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Listener = Callable[[str, str, str, dict[str, Any]], None]  # (event, stage, batch, info)
_listeners: list[Listener] = []


def add_listener(listener: Listener) -> None:
    _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


def emit(event: str, stage: str, batch: str, info: dict[str, Any] | None = None) -> None:
    for listener in list(_listeners):
        listener(event, stage, batch, info or {})
