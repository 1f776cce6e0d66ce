"""Issue 18, beyond the list: the tar and media readers fed a corpus of hostile archives (bombs of up to
4 GB decoded, a 400-megapixel PNG, a WAV announcing 2G frames, unsafe names, links, cuts, random mutations)
in a subprocess under a 2 GB address-space limit: nothing escapes as an exception and peak RSS stays < 1 GB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .attacks import UNSAFE_NAMES, archive_corpus

REPO = Path(__file__).resolve().parents[2]
LIMIT = 2 << 30
PEAK_RSS_LIMIT = 1 << 30


def fuzz(folder: Path, **corpus: int) -> tuple[list[dict], int]:
    files = []
    for name, data in archive_corpus(**corpus):
        files.append(folder / name)
        files[-1].write_bytes(data)
    done = subprocess.run(
        [sys.executable, str(REPO / "tests/hostile/fuzz_readers.py"), str(LIMIT), *map(str, files)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return lines[:-1], lines[-1]["peak_rss_bytes"]


@pytest.mark.slow
def test_hostile_archives_are_rejects_in_bounded_memory(tmp_path):
    results, peak = fuzz(tmp_path)
    assert [r for r in results if "escaped" in r] == []
    by_file = {r["file"]: r["outcomes"] for r in results}
    for name in (
        "gzip-bomb-256MB.tar",
        "gzip-bomb-1024MB.tar",
        "gzip-bomb-4096MB.tar",
        "gzip-multi-member-bomb-4096MB.tar",
    ):
        assert by_file[name] == {"archive_bomb": 1}, name
    assert by_file["pixel-bomb.tar.gz"] == {"media:decompression_bomb": 1}
    assert by_file["link.tar"]["link_member"] == 1
    assert [by_file[f"name-{i}.tar"].get("unsafe_member_name", 0) for i in range(len(UNSAFE_NAMES) + 2)] == [
        1
    ] * len(UNSAFE_NAMES) + [0, 0]
    assert sum(by_file["lying-wav.tar"].values()) == 1  # decoded as what it holds, never as what it announces
    assert peak < PEAK_RSS_LIMIT, f"peak RSS {peak / 2**20:.0f} MiB"
