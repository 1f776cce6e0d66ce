"""Unit count follows bytes, not file count: 5,000 tiny files land and validate in about the time of one
file holding the same documents (measured side by side here), with the same records out."""

from __future__ import annotations

import json
import time

import pytest
from test_stages_unit import run_chain

import fm_assets.transforms.text.validate  # noqa: F401  (GX's import, once, outside both timings)
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_resources.pipeline_config import PipelineConfigResource

pytestmark = [pytest.mark.slow]
FILES = 5000


def _land_and_validate(tmp_path, name: str, texts: list[str], tiny: bool) -> tuple[float, dict]:
    src = tmp_path / f"src-{name}"
    src.mkdir()
    if tiny:
        for i, text in enumerate(texts):
            (src / f"doc-{i:05d}.jsonl").write_text(json.dumps({"text": text}) + "\n")
    else:
        (src / "all.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    store = ObjectStore(str(tmp_path / f"root-{name}"))
    settings = PipelineConfigResource(progress=False, near_dedup=False, workers=1)
    started = time.perf_counter()
    land_batch(store, src, source=name, license_id="MIT", namespace="cloud", batch_id="b1")
    outcomes = run_chain(store, "b1", settings, tokenizer=None, until="validate")  # type: ignore[arg-type]
    return time.perf_counter() - started, outcomes


def test_five_thousand_tiny_files_cost_about_one_file(tmp_path):
    texts = [
        f"Document {i} explains how the landing stage groups small files into units. " * 4
        for i in range(FILES)
    ]
    many_s, many = _land_and_validate(tmp_path, "many", texts, tiny=True)
    one_file_s, one = _land_and_validate(tmp_path, "one", texts, tiny=False)
    assert many["land"].success.counts.records_out == one["land"].success.counts.records_out == FILES
    assert many["validate"].success.counts.records_out == one["validate"].success.counts.records_out
    assert len(many["land"].success.units) == 1  # ~2 MB of files: one land unit, not 5,000
    assert len(many["validate"].success.units) <= 2
    # What stays per file: its copy into landing/, its CAS object and its parse, about 0.25 ms each on an idle
    # machine; 1 ms leaves room for a busy one and is still 30x below one unit per file (~30 ms per file in
    # land alone, far more in validate)
    per_file_allowance_s = 0.001
    assert many_s < 3 * one_file_s + FILES * per_file_allowance_s, (many_s, one_file_s)
