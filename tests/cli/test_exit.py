"""`fm` as a process skips Python's final collection of what a command built (seconds after `fm run`);
a caller of ``main([...])`` (tests, scripts) keeps its garbage collector untouched."""

from __future__ import annotations

import gc
import sys

from fm_assets.cli import main as cli


def test_only_the_fm_process_freezes_its_objects_before_exiting(tmp_path, monkeypatch):
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    root = str(tmp_path / "root")
    assert cli.main(["--root", root, "report", "--json"]) == 0
    assert frozen == []
    monkeypatch.setattr(sys, "argv", ["fm", "--root", root, "report", "--json"])
    assert cli.main() == 0
    assert frozen == [True]
