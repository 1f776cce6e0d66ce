"""The model-based quality score: trained by an explicit step, pinned by sha256, in filter's key and output."""

from __future__ import annotations

import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.defs.resources.side_inputs import QualityModelResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.quality_model import iter_sample_texts, register_model, train_from_folder
from fm_assets.stages.filter import MODEL_REASON, STAGE, check_model_score_distribution, model_score_histogram
from fm_assets.stages.registry import TEXT_STAGES
from fm_assets.transforms.text.quality_model import NEGATIVE_KINDS, QualityModel
from tests.stages.test_stages_unit import real_texts, write_jsonl


@pytest.fixture(scope="module")
def model(real_sample) -> QualityModel:
    return train_from_folder(real_sample["dest"])


def test_training_is_deterministic_and_separates_pages_from_damaged_copies(model, real_sample):
    assert train_from_folder(real_sample["dest"]).to_bytes() == model.to_bytes()
    assert QualityModel.from_bytes(model.to_bytes()).score("a b c d") == model.score("a b c d")
    pages = [t for t in iter_sample_texts(real_sample["dest"]) if len(t.split()) >= 50][1::7]
    good = model.score_many(pages)
    rng = random.Random(11)
    for kind, damage in NEGATIVE_KINDS.items():
        bad = model.score_many([damage(page, rng) for page in pages])
        assert np.median(bad) < np.median(good), kind
    assert model.trained_on["held_out_good_accepted"] >= 0.9


def _run_filter(store: ObjectStore, batch: str):
    settings = PipelineConfigResource(progress=False, near_dedup=False)
    for stage in TEXT_STAGES:
        outcome = materialize(stage, StageContext(store, batch, settings, {})).outcome
        if stage is STAGE:
            return outcome
    raise AssertionError("filter is not a registered stage")


@pytest.mark.slow
def test_filter_scores_with_the_pinned_model_and_rejects_below_its_threshold(tmp_path, model, real_sample):
    pages = real_texts(real_sample, 14)
    rng = random.Random(3)
    salads = [NEGATIVE_KINDS["word_salad"](page, rng) for page in pages[8:]]  # pass the heuristic rules
    store = ObjectStore(str(tmp_path / "root"))
    texts = [*pages[:8], *salads]
    batch = land_batch(
        store, write_jsonl(tmp_path / "a.jsonl", texts), source="a", license_id="MIT", namespace="cloud"
    ).batch
    heuristic = _run_filter(store, batch)
    assert "quality_model" not in heuristic.success.inputs

    pinned = register_model(store, model.to_bytes(), "test")
    scored = _run_filter(store, batch)
    success = scored.success
    assert scored.key != heuristic.key and success.inputs["quality_model"] == pinned.sha256
    expected = sum(model.score(t) < model.min_score for t in salads + pages[:8])
    assert expected >= 1 and success.rejects_by_reason.get(MODEL_REASON, 0) == expected
    kept = [row for part in success.parts for row in pq.read_table(store.local_path(part)).to_pylist()]
    for row in kept:
        assert row["quality_score"] == pytest.approx(model.score(row["text"]))
        assert row["quality_score"] >= model.min_score
    assert sum(model_score_histogram(success)) == len(kept) + success.rejects_by_reason.get(MODEL_REASON, 0)
    outcome = check_model_score_distribution(store, success, STAGE)
    assert outcome.metadata["model"] == pinned.sha256 and outcome.metadata["scored"] == sum(
        model_score_histogram(success)
    )


def test_the_asset_source_trains_once_per_folder_state(tmp_path, real_sample):
    store = ObjectStore(str(tmp_path / "root"))
    source = QualityModelResource(train_dir=real_sample["dest"])
    registered = source.register(store)
    assert registered is not None and registered[1] == "trained"
    again = source.register(store)
    assert again is not None and again[1] == "unchanged" and again[0].sha256 == registered[0].sha256
    assert QualityModelResource().register(store) is None
