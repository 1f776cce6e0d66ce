"""Read receipts: a run that opts in leaves one whole record per rank and checkpoint, and only then."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from loader_helpers import make_dataset

from fm_loader import Loader
from fm_loader.receipts import ENV_ROOT, ENV_RUN_ID, read_receipts, runs_by_version


def _receipt_files(root: Path) -> list[Path]:
    return sorted((root / "receipts").rglob("*.json"))


def test_each_checkpoint_of_each_rank_leaves_a_record_of_what_was_read(tmp_path):
    manifest = make_dataset(str(tmp_path / "ds"), [10, 7])
    root = tmp_path / "root"
    for rank in range(2):
        with Loader(
            manifest, global_batch_size=4, world_size=2, rank=rank, seed=5, run_id="run-1", receipts=str(root)
        ) as loader:
            batches = iter(loader)
            next(batches)
            loader.state_dict()
            next(batches)
            next(batches)
            state = loader.state_dict()
    files = _receipt_files(root)
    # two checkpoints per rank: after batch 1 (row 4) and batch 3 (row 12); close() repeats the last position
    plan = state["fingerprint"]
    assert [f.relative_to(root / "receipts" / "run-1").as_posix() for f in files] == [
        f"rank-{r:05d}/{plan}-e0000-{p:012d}.json" for r in range(2) for p in (4, 12)
    ]
    last = json.loads(files[-1].read_text())
    assert last["run_id"] == "run-1" and last["rank"] == 1 and last["world_size"] == 2 and last["seed"] == 5
    assert last["state"] == state and last["steps_consumed"] == 3
    (dataset,) = last["datasets"]
    assert dataset["manifest_sha256"] == hashlib.sha256(Path(manifest).read_bytes()).hexdigest()
    runs = runs_by_version(read_receipts(str(root)))
    (key,) = runs
    assert key == (dataset["name"], dataset["version"])
    (run,) = runs[key]
    assert run["run_id"] == "run-1" and run["ranks"] == [0, 1] and run["last_step"] == 2


def test_without_opting_in_nothing_is_written_and_the_environment_opts_in(tmp_path, monkeypatch):
    manifest = make_dataset(str(tmp_path / "ds"), [6])
    root = tmp_path / "root"
    with Loader(manifest, global_batch_size=2) as loader:
        next(iter(loader))
        loader.state_dict()
    assert not (root / "receipts").exists()
    monkeypatch.setenv(ENV_RUN_ID, "from-env")
    monkeypatch.setenv(ENV_ROOT, str(root))
    with Loader(manifest, global_batch_size=2) as loader:
        next(iter(loader))
    assert [r["run_id"] for r in read_receipts(str(root))] == ["from-env"]


def test_two_loaders_of_one_run_keep_their_receipts_apart_and_workers_write_none(tmp_path):
    root = tmp_path / "root"
    first = make_dataset(str(tmp_path / "a"), [8], name="a")
    second = make_dataset(str(tmp_path / "b"), [8], name="b", seed=1)
    for manifest, workers in ((first, 0), (second, 2)):
        with Loader(
            manifest, global_batch_size=2, num_workers=workers, run_id="run", receipts=str(root)
        ) as loader:
            for _ in zip(range(2), loader, strict=False):
                pass
            loader.state_dict()
    records = read_receipts(str(root))
    assert sorted(r["datasets"][0]["name"] for r in records) == ["a", "b"]  # none from the workers, none lost
    assert all(r["state"]["rows_consumed"] == 4 for r in records)


def test_half_a_setting_or_a_path_like_run_id_is_refused(tmp_path):
    manifest = make_dataset(str(tmp_path / "ds"), [6])
    with pytest.raises(ValueError, match="need both run_id= and receipts="):
        Loader(manifest, global_batch_size=2, run_id="x")
    with pytest.raises(ValueError, match="letters, digits"):
        Loader(manifest, global_batch_size=2, run_id="../escape", receipts=str(tmp_path))
