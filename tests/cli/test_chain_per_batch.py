"""Each batch runs only its own chain's steps, the way users run it (`fm land` + `fm run`): a media batch runs
no text step (no text refs, no text materializations, no rows of zeros in `fm run`'s table) and a text batch
no media step; the text batch landed after the media batch does not wait for text output the media batch
never produces; a media-only batch is not held back from the text release."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance
from media_batch import write_media_batch
from sample_licence import package_licence

from fm_assets.stages.names import CHAIN_NAMES, MEDIA, TEXT

pytestmark = [pytest.mark.slow]
FM = [sys.executable, "-m", "fm_assets.cli.main"]


def _fm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FM, *args], env=dict(os.environ), capture_output=True, text=True, timeout=1200)


def test_a_media_batch_and_a_text_batch_each_run_their_own_chain(fm_env, real_sample, tmp_path, monkeypatch):
    monkeypatch.setenv("FM_NEAR_DEDUP", "false")  # no Spark: the chain selection is what this test is about
    media = _fm(
        "land", str(write_media_batch(tmp_path / "media")), "--source", "media", "--license", "CC-BY-4.0"
    )
    docs = Path(real_sample["dest"]) / sorted(real_sample["packages"])[0]
    text = _fm("land", str(docs), "--source", "docs", "--license", package_licence(docs))
    assert media.returncode == 0 and text.returncode == 0, media.stderr + text.stderr
    media_batch, text_batch = media.stdout.strip(), text.stdout.strip()
    assert media_batch < text_batch  # the text batch is later: its dedup must not wait for the media batch

    run = _fm("run", "--json")
    assert run.returncode == 0, run.stderr[-4000:]
    rows = json.loads(run.stdout)
    stages = {batch: [r["stage"] for r in rows if r["batch"] == batch] for batch in (media_batch, text_batch)}
    assert stages[media_batch] == CHAIN_NAMES[MEDIA], stages
    assert stages[text_batch] == CHAIN_NAMES[TEXT], stages

    root = Path(os.environ["FM_ROOT"])
    assert not (root / "refs" / "land" / f"{media_batch}.json").exists()
    assert not (root / "refs" / "media_land" / f"{text_batch}.json").exists()
    with DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
        for stage, batch in (("land", text_batch), ("shard", text_batch), ("media_land", media_batch)):
            events = instance.fetch_materializations(AssetKey(stage), limit=10).records
            assert [e.partition_key for e in events] == [batch], (stage, [e.partition_key for e in events])
            # the standard row count: what the stage's own accounting says it wrote
            materialization = events[0].asset_materialization
            assert materialization is not None
            row = next(r for r in rows if r["batch"] == batch and r["stage"] == stage)
            assert materialization.metadata["dagster/row_count"].value == row["records_out"] > 0

    # neither release lists the other chain's batch as held back
    cards = [json.loads(p.read_text()) for p in root.glob("datasets/*/*/card.json")]
    assert cards
    for card in cards:
        assert all(h["batch"] not in (media_batch, text_batch) for h in card.get("held_back", [])), card
