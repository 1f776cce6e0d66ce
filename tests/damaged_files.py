"""A stored file damaged the way a bad disk or a torn copy would leave it, and an integrity check run on it
in-process and on two pool workers (the shard checks' tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def in_process_and_on_workers(check: Callable[[], T]) -> tuple[T, T]:
    """``check()`` in this process, then with its per-file work spread over 2 worker processes."""
    from fm_assets.engine.pool import spread_over

    in_process = check()
    with spread_over(2):
        on_workers = check()
    return in_process, on_workers
