"""What a trained tokenizer learns from does not depend on landing or run order: the earliest landed batch
that kept any text, its curated documents or else (an image or audio batch) its captions and transcripts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from media_batch import CAPTIONS, write_media_batch
from media_fixtures import png_image

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.refs import EarlierBatchPending
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.side_inputs.tokenizer import (
    CAPTION_STAGE,
    TRAINING_STAGE,
    TokenizerError,
    TokenizerSpec,
    ensure_pinned,
)
from fm_assets.stages.registry import MEDIA_STAGES, TEXT_STAGES

IMAGES, TEXT = "20260101T000000000000Z-gen-00000001", "20260102T000000000000Z-web-00000002"
SPEC = TokenizerSpec(train_vocab_size=400)
SIDE_INPUTS = {"blocklists": BlocklistSource(), "eval_registry": EvalRegistry()}
SETTINGS = PipelineConfigResource(progress=False, near_dedup=False, seq_len=64, rows_per_shard=4)


def real_texts(sample: dict, count: int) -> list[str]:
    texts = []
    for path in sorted(Path(sample["dest"]).rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line)["text"]
            if 400 < len(text.split()) < 3000:
                texts.append(text)
    return texts[:count]


def run_until(store: ObjectStore, batch: str, last: str) -> None:
    """The stages of ``last``'s chain for ``batch``, in order, up to ``last`` (as the preprocess job runs them)."""
    chain = MEDIA_STAGES if last == CAPTION_STAGE else TEXT_STAGES
    for stage in chain:
        materialize(stage, StageContext(store, batch, SETTINGS, SIDE_INPUTS))
        if stage.name == last:
            return


def land_images_then_text(root: Path, tmp_path: Path, sample: dict, images_folder: Path) -> ObjectStore:
    store = ObjectStore(str(root))
    land_batch(store, images_folder, source="gen", license_id="CC-BY-4.0", namespace="cloud", batch_id=IMAGES)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in real_texts(sample, 4)))
    land_batch(store, docs, source="web", license_id="MIT", namespace="cloud", batch_id=TEXT)
    return store


def test_an_image_batch_landed_first_trains_on_its_captions_whatever_runs_first(tmp_path, real_sample):
    store = land_images_then_text(tmp_path / "a", tmp_path, real_sample, write_media_batch(tmp_path / "one"))
    run_until(store, IMAGES, TRAINING_STAGE)  # the text chain of an image batch keeps no document
    run_until(store, IMAGES, CAPTION_STAGE)
    pinned, action = ensure_pinned(store, SPEC, for_batch=IMAGES)  # used to fail: "kept no documents"
    assert action == "trained"
    assert store.read_json("tokenizers/pinned.json")["origin"] == f"trained:{IMAGES}:captions"
    caption = CAPTIONS["harbour"]
    assert len(pinned.tokenizer.encode(caption).ids) < len(caption) / 2  # it learnt merges from the captions
    assert pinned.tokenizer.decode(pinned.tokenizer.encode(caption).ids) == caption

    # the same landed batches in a second root, where the text batch's documents are curated before the image
    # batch's captions are landed: the tokenizer waits for the captions instead of taking the documents
    other = ObjectStore(str(tmp_path / "b"))
    for folder in ("landing", "cas"):
        shutil.copytree(tmp_path / "a" / folder, tmp_path / "b" / folder)
    run_until(other, IMAGES, TRAINING_STAGE)
    run_until(other, TEXT, TRAINING_STAGE)
    with pytest.raises(EarlierBatchPending, match="earliest landed batch that kept any") as waiting:
        ensure_pinned(other, SPEC, for_batch=TEXT)
    assert (waiting.value.stage, waiting.value.missing) == (CAPTION_STAGE, [IMAGES])
    assert not other.exists("tokenizers/pinned.json")
    run_until(other, IMAGES, CAPTION_STAGE)
    assert ensure_pinned(other, SPEC, for_batch=TEXT)[0].sha256 == pinned.sha256


def test_a_first_batch_without_any_text_hands_over_to_the_next(tmp_path, real_sample):
    """Only uncaptioned images in the first batch: its run says which batch to run instead of stalling, and
    once that batch ran, the tokenizer learns from its documents."""
    folder = tmp_path / "uncaptioned"
    folder.mkdir()
    (folder / "a.png").write_bytes(png_image(200, 150, seed=1))
    store = land_images_then_text(tmp_path / "root", tmp_path, real_sample, folder)
    run_until(store, IMAGES, TRAINING_STAGE)
    run_until(store, IMAGES, CAPTION_STAGE)
    with pytest.raises(TokenizerError, match=f"no landed batch up to {IMAGES} kept any text") as raised:
        ensure_pinned(store, SPEC, for_batch=IMAGES)
    assert f"fm run {TEXT}" in str(raised.value)
    assert not store.exists("tokenizers/pinned.json")

    run_until(store, TEXT, TRAINING_STAGE)
    _, action = ensure_pinned(store, SPEC, for_batch=IMAGES)
    assert action == "trained" and store.read_json("tokenizers/pinned.json")["origin"] == f"trained:{TEXT}"
