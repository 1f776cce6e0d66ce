"""`fm run` starts the unit workers' fork server early only when a batch will use worker processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, multiprocessing.forkserver, sys
from fm_assets.cli.head_start import warm_unit_workers
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import load_settings

if __name__ == "__main__":
    root, docs = sys.argv[1], sys.argv[2]
    store = ObjectStore(root)
    batch = land_batch(store, docs, source="s", license_id="MIT", namespace="cloud").batch
    server = multiprocessing.forkserver._forkserver
    decisions = {}
    for name, workers, part_bytes in (("one_worker", 1, 1000), ("one_part", 2, 10**9), ("spark", 2, 1000)):
        executor = "spark" if name == "spark" else "local"
        settings = load_settings(root=root, workers=workers, land_part_bytes=part_bytes, unit_executor=executor)
        decisions[name] = [warm_unit_workers(settings, store, [batch]), server._forkserver_pid is not None]
    settings = load_settings(root=root, workers=2, land_part_bytes=1000)
    decisions["several_parts"] = [warm_unit_workers(settings, store, [batch]), server._forkserver_pid is not None]
    print(json.dumps(decisions))
"""


def test_the_fork_server_starts_early_only_for_a_batch_with_several_units_and_workers(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": f"document {i} " * 40}) + "\n" for i in range(20)))  # ~9 KB
    script = tmp_path / "warm.py"
    script.write_text(SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "root"), str(docs)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    decisions = json.loads(result.stdout.strip().splitlines()[-1])
    assert decisions == {
        "one_worker": [False, False],
        "one_part": [False, False],
        "spark": [False, False],
        "several_parts": [True, True],
    }
