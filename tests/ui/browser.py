"""Headless Chromium for the UI tests: Debian's /usr/bin/chromium driven through Playwright (never a
downloaded browser), and numbered screenshots of each step (copied to tests/ui/screenshots when
FM_SAVE_SCREENSHOTS=1)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPO_SCREENSHOTS = Path(__file__).with_name("screenshots")
UI_TIMEOUT_MS = 120_000


class Screenshots:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.taken: list[Path] = []

    def take(self, page: Any, name: str) -> Path:
        path = self.folder / f"{len(self.taken) + 1:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=False)
        self.taken.append(path)
        if os.environ.get("FM_SAVE_SCREENSHOTS") == "1":
            REPO_SCREENSHOTS.mkdir(exist_ok=True)
            shutil.copy2(path, REPO_SCREENSHOTS / path.name)
        return path


def open_page() -> Iterator[Any]:
    """A Playwright page on headless Chromium (the ``browser_page`` fixture); skips without Chromium or
    Playwright."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} not found: `apt-get install -y chromium` (Debian's build drives these tests)"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="`pip install playwright` (no browser download)"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(UI_TIMEOUT_MS)
            yield page
        finally:
            browser.close()
