"""Every text stage runs its units on the worker pool, and the whole chain (near_dedup's removals,
decontaminate, tokenize, pack, shard included) writes byte-identical files with 1 and 2 workers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fm_assets.cli.runner import run_batches
from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import load_settings
from fm_assets.stages.registry import CHAIN_NAMES

pytestmark = [pytest.mark.slow]

POOLED = ("validate", "filter", "near_dedup", "decontaminate", "tokenize", "pack", "shard")


def output_digests(store: ObjectStore, batch: str) -> dict[str, dict[str, str]]:
    """sha256 of every file each stage wrote, but the unit markers and _SUCCESS.json (they hold timings)."""
    digests = {}
    for stage in CHAIN_NAMES["text"]:
        success = read_success(store, stage, batch)
        folder = Path(store.root) / success.prefix
        digests[stage] = {
            str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*"))
            if path.is_file() and "_units" not in path.parts and path.name != "_SUCCESS.json"
        }
    return digests


def test_one_and_two_workers_write_the_same_bytes_in_every_stage(
    fm_env: Path, real_sample: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = sorted(real_sample["packages"])[0]
    source = Path(real_sample["dest"]) / package
    monkeypatch.setenv("FM_SPARK_MASTER", "local[1]")  # near_dedup stays below the in-process threshold
    monkeypatch.setenv("FM_PACK_TOKENS_PER_UNIT", "100000")  # several pack units from a small batch
    monkeypatch.setenv("FM_MIN_PACKING_EFFICIENCY", "0.5")  # ... each with its own partial last row
    results = {}
    for workers in (1, 2):
        root = fm_env.parent / f"root-w{workers}"
        monkeypatch.setenv("FM_ROOT", str(root))
        monkeypatch.setenv("FM_WORKERS", str(workers))
        store = ObjectStore(str(root))
        batch = land_batch(
            store,
            source,
            source=package,
            license_id=real_sample["packages"][package]["license"],
            namespace="cloud",
            batch_id="b-workers",  # the batch id is in the rows: the same in both roots
        ).batch
        assert run_batches(load_settings()) == {}
        results[workers] = (store, batch, output_digests(store, batch))
    (_, _, one), (store2, batch2, two) = results[1], results[2]
    assert one.keys() == two.keys()
    for stage in CHAIN_NAMES["text"]:
        assert one[stage], stage  # the stage wrote files
        assert one[stage] == two[stage], stage
    for stage in POOLED:  # with 2 workers these stages' units really ran on the pool
        success = read_success(store2, stage, batch2)
        assert len(success.units) >= 2, stage
        assert success.cost["units_where"] == "2 worker processes", (stage, success.cost)
        assert 0 < success.cost["units_wall_seconds"] <= success.seconds + 1e-3, stage
