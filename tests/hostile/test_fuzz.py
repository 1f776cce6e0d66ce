"""Issue 18, beyond the list: the tar and media readers fed a corpus of hostile archives (bombs of up to
4 GB decoded, a 900-megapixel PNG, a WAV announcing 2G frames, unsafe names, links, cuts, random mutations)
in a subprocess under a 2 GB address-space limit: nothing escapes as an exception and peak RSS stays < 1 GB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .attacks import archive_corpus

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
    assert by_file["gzip-bomb-4096MB.tar"] == {"archive_bomb": 1}
    assert by_file["gzip-bomb-1024MB.tar"] == {"archive_bomb": 1}
    assert by_file["link.tar"] == {"media:corrupt": 1, "link_member": 1} or "link_member" in by_file["link.tar"]
    assert set(by_file["pixel-bomb.tar.gz"]) <= {"media:decompression_bomb", "media:too_many_pixels"} or all(
        k.startswith("media:") for k in by_file["pixel-bomb.tar.gz"]
    )
    assert all(k.startswith("media:") for k in by_file["lying-wav.tar"])
    assert sum(1 for r in results if "unsafe_member_name" in r["outcomes"]) == 4
    assert peak < PEAK_RSS_LIMIT, f"peak RSS {peak / 2**20:.0f} MiB"
