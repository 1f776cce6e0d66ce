"""`fm trace` refuses what it cannot answer with one line naming why (no traceback, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fm_assets.cli.main import main
from fm_loader import DatasetManifest, ShardEntry


def plan_only_manifest(folder: Path) -> str:
    """Two shards of 3 rows that exist only in the manifest: tracing a step reads no shard."""
    entries = [ShardEntry(f"s/{i}.tar", f"{i:064x}", 3, 96, max_docs_per_row=4) for i in range(2)]
    path = folder / "manifest.json"
    DatasetManifest("outside", "v1", 32, 1000, "tok", "c", entries).save(str(path))
    return str(path)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--run", "nobody", "--step", "0", "--row", "0"], "no read receipt of run 'nobody'"),
        (["--step", "0", "--row", "0"], "name the data: --manifest (or --run)"),
        (["--manifest", "{manifest}", "--step", "0", "--row", "0"], "--step/--row need --global-batch-size"),
        (
            ["--manifest", "{manifest}", "--step", "0", "--row", "9", "--global-batch-size", "4",
             "--world-size", "2", "--seed", "0"],
            "--row 9 is outside a rank's batch of 2 rows",
        ),
        (
            ["--manifest", "{manifest}", "--step", "1", "--row", "0", "--global-batch-size", "4",
             "--world-size", "1", "--seed", "0"],
            "is not under the storage root",
        ),
        (["--manifest", "{manifest}", "--sample-id", "99"], "sample id 99 is past the manifest's 6 rows"),
    ],
)  # fmt: skip
def test_an_unanswerable_trace_says_why_in_one_line(tmp_path, capsys, args, says):
    manifest = plan_only_manifest(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    code = main(["--root", str(root), "trace", *[a.format(manifest=manifest) for a in args]])
    err = capsys.readouterr().err
    assert code == 2
    assert says in " ".join(err.split()), err
    assert "Traceback" not in err
