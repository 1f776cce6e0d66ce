"""Fixtures for the UI tests: a DagsterStack over the fm_env platform (processes stopped, and their log
tails printed when the test failed), and small real batches to land."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import open_page
from dagster_stack import DagsterStack


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[FAILED] = report.failed


FAILED = pytest.StashKey[bool]()


@pytest.fixture
def dagster_stack(fm_env: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DagsterStack]:
    stack = DagsterStack.create(home=tmp_path / "dagster_home", root=fm_env, logs=tmp_path / "logs")
    try:
        yield stack
    finally:
        stack.stop()
        if request.node.stash.get(FAILED, False):
            print(f"\n{stack.log_tails(120)}")  # the processes' own account of what went wrong


@pytest.fixture(scope="session")
def sample_files(real_sample: dict) -> list[tuple[Path, str, str]]:
    """(file, source, licence) for every JSONL file of the real sample, smallest first (one file lands as a
    small batch of real documents)."""
    files = []
    for package, info in sorted(real_sample["packages"].items()):
        for path in sorted((Path(real_sample["dest"]) / package).glob("*.jsonl")):
            files.append((path, package, info["license"]))
    files.sort(key=lambda item: item[0].stat().st_size)
    assert files, json.dumps(real_sample, default=str)[:500]
    return files


@pytest.fixture
def browser_page() -> Iterator[Any]:
    yield from open_page()
