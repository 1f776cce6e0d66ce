"""The `fm` command line: clear errors for bad landing requests, batch ids on stdout."""

from __future__ import annotations

import re
import subprocess
import sys


def fm(*args: str, root) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fm_assets.cli.main", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_land_prints_batch_id_and_refuses_bad_requests(tmp_path):
    src = tmp_path / "docs.jsonl"
    src.write_text('{"text": "hello"}\n')
    ok = fm(
        "land",
        str(src),
        "--source",
        "web",
        "--license",
        "CC-BY-4.0",
        "--namespace",
        "cloud",
        root=tmp_path / "r",
    )
    assert ok.returncode == 0, ok.stderr
    batch = ok.stdout.strip()
    assert re.fullmatch(r"\d{8}T\d{12}Z-web-[0-9a-f]{8}", batch), batch
    assert (tmp_path / "r" / "landing" / batch / "_batch.json").exists()

    no_licence = fm("land", str(src), "--source", "web", "--namespace", "cloud", root=tmp_path / "r")
    assert no_licence.returncode == 2 and "licence" in no_licence.stderr
    bad_namespace = fm(
        "land", str(src), "--source", "web", "--license", "MIT", "--namespace", "x", root=tmp_path / "r"
    )
    assert bad_namespace.returncode == 2 and "namespace" in bad_namespace.stderr
    missing = fm("land", str(tmp_path / "nope"), "--source", "web", "--license", "MIT", root=tmp_path / "r")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
