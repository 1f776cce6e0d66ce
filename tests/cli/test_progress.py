"""Progress without a terminal: ``FM_PROGRESS`` defaults to bars on a TTY only, and the engine's unit progress
becomes an occasional log line instead of a bar redrawn into the log."""

from __future__ import annotations

import logging
import os
import pty
import subprocess
import sys

import pytest

from fm_assets.engine import progress

PRINT_PROGRESS = "from fm_assets.settings import load_settings; print(load_settings().progress)"


def _progress_setting(env: dict[str, str], *, terminal: bool) -> str:
    if not terminal:
        result = subprocess.run(
            [sys.executable, "-c", PRINT_PROGRESS], env=env, capture_output=True, text=True, check=True
        )
        return result.stdout.strip()
    leader, follower = pty.openpty()
    try:
        subprocess.run(
            [sys.executable, "-c", PRINT_PROGRESS], env=env, stdout=follower, stderr=follower, check=True
        )
        return os.read(leader, 1000).decode().strip()
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.parametrize(
    ("value", "terminal", "expected"),
    [(None, False, "False"), (None, True, "True"), ("auto", True, "True"), ("auto", False, "False"),
     ("1", False, "True"), ("0", True, "False")],
)  # fmt: skip
def test_progress_is_auto_by_default(value, terminal, expected):
    env = {k: v for k, v in os.environ.items() if k != "FM_PROGRESS"}
    if value is not None:
        env["FM_PROGRESS"] = value
    assert _progress_setting(env, terminal=terminal) == expected


def test_without_bars_unit_progress_is_a_periodic_log_line(caplog):
    caplog.set_level(logging.INFO, logger=progress.__name__)
    quick = progress.unit_progress(10, "pack[b1]", bars=False)
    quick.update(10)
    quick.close()
    assert caplog.records == []  # a run shorter than the interval stays silent

    slow = progress.LoggedProgress(40, "pack[b1]", every=0.0)
    slow.update(3)
    slow.update(9)
    slow.close()
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0].startswith("pack[b1]: 3/40 units (7%)") and lines[-1].startswith("pack[b1]: 12/40 units")
    assert all("\r" not in line for line in lines)


def test_with_bars_unit_progress_is_a_tqdm_bar():
    bar = progress.unit_progress(5, "pack[b1]", bars=True)
    try:
        assert type(bar).__module__.startswith("tqdm")
    finally:
        bar.close()
