"""A batch whose run fails is held back from the release, with its reason; the batches that passed are
still released, and the failed batch's shards from an earlier run are not released as if current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Root, flip_bit
from sample_licence import package_licence

pytestmark = [pytest.mark.slow]


def _latest_card(root: Root) -> dict:
    (latest,) = (root.path / "datasets").glob("*/LATEST.json")
    version = json.loads(latest.read_text())["version"]
    return json.loads((latest.parent / version / "card.json").read_text())


def test_failed_batch_is_held_back_and_the_rest_released(root: Root, real_sample) -> None:
    second = Path(real_sample["dest"]) / sorted(real_sample["packages"])[1]
    landed = root.fm("land", str(second), "--source", "second", "--license", package_licence(second))
    assert landed.returncode == 0, landed.stderr
    batch_b = landed.stdout.strip()
    assert root.fm("run").returncode == 0
    assert {b["batch"] for b in _latest_card(root)["batches"]} == {root.batch, batch_b}

    # a new packing floor makes every pack recompute; batch B's finds its tokenize input damaged and fails
    flip_bit(Root(root.path, root.env, batch_b).output_file("tokenize", "part-*.parquet"))
    root.env["FM_MIN_PACKING_EFFICIENCY"] = "0.951"
    run = root.fm("run")
    assert run.returncode == 1
    assert f"batch {batch_b} failed" in run.stderr and "held_back" in run.stderr, run.stderr

    card = _latest_card(root)
    assert [b["batch"] for b in card["batches"]] == [root.batch]
    (held,) = card["held_back"]
    assert held["batch"] == batch_b and "pack" in held["reason"], held
    assert all(batch_b not in shard["path"] for shard in _current_manifest(root)["shards"])


def _current_manifest(root: Root) -> dict:
    (latest,) = (root.path / "datasets").glob("*/LATEST.json")
    version = json.loads(latest.read_text())["version"]
    return json.loads((latest.parent / version / "manifest.json").read_text())
