"""Unit count follows bytes, not file count: 5,000 tiny files land as one unit and validate as one or two,
with the same records out as one file holding the same documents. (How long each takes is a benchmark's
question, not a test's: a timing budget here failed whenever the machine was busy.)"""

from __future__ import annotations

import json

import pytest
from test_stages_unit import run_chain

import fm_assets.transforms.text.validate  # noqa: F401  (validate's module import, once, outside both timings)
from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore

pytestmark = [pytest.mark.slow]
FILES = 5000


def _land_and_validate(tmp_path, name: str, texts: list[str], tiny: bool) -> dict:
    src = tmp_path / f"src-{name}"
    src.mkdir()
    if tiny:
        for i, text in enumerate(texts):
            (src / f"doc-{i:05d}.jsonl").write_text(json.dumps({"text": text}) + "\n")
    else:
        (src / "all.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    store = ObjectStore(str(tmp_path / f"root-{name}"))
    settings = PipelineConfigResource(progress=False, near_dedup=False, workers=1)
    land_batch(store, src, source=name, license_id="MIT", namespace="cloud", batch_id="b1")
    return run_chain(store, "b1", settings, tokenizer=None, until="validate")  # type: ignore[arg-type]


def test_five_thousand_tiny_files_are_one_land_unit(tmp_path):
    texts = [
        f"Document {i} explains how the landing stage groups small files into units. " * 4
        for i in range(FILES)
    ]
    many = _land_and_validate(tmp_path, "many", texts, tiny=True)
    one = _land_and_validate(tmp_path, "one", texts, tiny=False)
    assert many["land"].success.counts.records_out == one["land"].success.counts.records_out == FILES
    assert many["validate"].success.counts.records_out == one["validate"].success.counts.records_out
    assert len(many["land"].success.units) == 1  # ~2 MB of files: one land unit, not 5,000
    assert len(many["validate"].success.units) <= 2
