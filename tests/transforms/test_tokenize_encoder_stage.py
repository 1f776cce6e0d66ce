"""The tokenize stage on the fast encoder: the same files (so the same data version) as on HF, the backend
recorded, and the blocking ``hf_reencode_sample`` check failing as soon as stored ids differ from HF's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tokenizers import Tokenizer

from fm_assets.engine import layout
from fm_assets.engine.records import Counts, StageSuccess
from fm_assets.engine.refs import write_ref
from fm_assets.engine.run import StageOutcome, run_stage
from fm_assets.engine.schemas import DOC_SCHEMA
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import PipelineSettings
from fm_assets.side_inputs.tokenizer import TokenizerRegistry
from fm_assets.stages import tokenize as tokenize_module
from fm_assets.stages.tokenize import CHECK_SAMPLE_PER_UNIT, STAGE, check_hf_reencode_sample
from fm_assets.transforms.tokens.encoder import HF, EncoderChoice, HFEncoder, build_encoder
from fm_assets.transforms.tokens.flat import Flat

BATCH = "20250101T000000Z-test"
UNITS = 3


def doc_row(i: int, text: str) -> dict:
    return {
        "doc_id": f"{i:016x}:{i}", "batch": BATCH, "source": "s", "license": "MIT", "namespace": "cloud",
        "cas_hash": f"{i:064x}", "record_index": i, "url": None, "text": text, "lang": "en",
        "lang_score": 1.0, "quality_score": 1.0, "pii_flags": None,
    }  # fmt: skip


def upstream_texts(real_sample: dict) -> list[str]:
    texts = []
    for path in sorted(Path(real_sample["dest"]).rglob("*.jsonl")):
        texts += [json.loads(line)["text"] for line in path.read_text().splitlines()]
    # documents that are empty after tokenize, and a few adversarial ones
    return [*texts, "", "   \n\t ", "x<|endoftext|>y", "  two  spaces  ", "😀👍🏽 東京 ٣٤"]


def write_decontaminate_output(store: ObjectStore, texts: Sequence[str]) -> None:
    """A committed decontaminate output of ``UNITS`` parts holding ``texts``, with its ref."""
    prefix = layout.stage_output("decontaminate", BATCH, "k")
    parts = []
    for unit in range(UNITS):
        rows = [doc_row(i, texts[i]) for i in range(unit, len(texts), UNITS)]
        rel = layout.in_output(prefix, layout.part_name(f"u{unit}"))
        store.local_path(rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=DOC_SCHEMA), store.local_path(rel))
        parts.append(rel)
    n = len(texts)
    success = StageSuccess(
        stage="decontaminate", batch=BATCH, key="k", prefix=prefix, code_version="v", config={}, inputs={},
        data_version="upstream-dv", units=[f"u{u}" for u in range(UNITS)], parts=parts, rejects=[],
        counts=Counts(n, n, 0, n, 0), rejects_by_reason={}, extra={}, artifacts={}, units_computed=UNITS,
        units_skipped=0, seconds=0.0,
    )  # fmt: skip
    store.write_json(layout.success_marker(prefix), success.to_json())
    write_ref(store, "decontaminate", BATCH, success, cache_hit=False, wall_seconds=0.0)


def tokenize(
    root: Path, texts: Sequence[str], tokenizer_file: Path, **settings: object
) -> tuple[ObjectStore, StageOutcome]:
    store = ObjectStore(str(root))
    write_decontaminate_output(store, texts)
    registry = TokenizerRegistry(store)
    registry.pin(registry.register_file(tokenizer_file), origin="test")
    context = StageContext(store, BATCH, PipelineSettings(progress=False, **settings))  # type: ignore[arg-type]
    return store, run_stage(STAGE, context)


def part_bytes(store: ObjectStore, outcome: StageOutcome) -> list[bytes]:
    return [store.read_bytes(rel) for rel in [*outcome.success.parts, *outcome.success.rejects]]


@pytest.fixture(scope="module")
def texts(real_sample) -> list[str]:
    return upstream_texts(real_sample)


def test_fast_encoder_writes_the_hf_output_and_the_check_passes(tmp_path, monkeypatch, texts, tokenizer_file):
    fast_store, fast = tokenize(tmp_path / "fast", texts, tokenizer_file)
    backend = fast.success.artifacts["encoder"]["backend"]
    assert backend == build_encoder(Tokenizer.from_file(str(tokenizer_file))).backend
    markers = [fast_store.read_json(layout.unit_marker(fast.prefix, unit)) for unit in fast.success.units]
    assert {m["extra"]["encoder"] for m in markers} == {backend}
    assert fast.success.artifacts["encoder"]["units"] == {backend: UNITS}
    assert fast.success.rejects_by_reason == {"empty_after_tokenize": 2}

    monkeypatch.setattr(
        tokenize_module, "encoder_for", lambda sha256, tokenizer: build_encoder(tokenizer, (HF,))
    )
    hf_store, hf = tokenize(tmp_path / "hf", texts, tokenizer_file)
    assert hf.success.artifacts["encoder"]["backend"] == HF
    assert hf.key == fast.key  # the backend is not in the key ...
    assert hf.data_version == fast.data_version  # ... because the files are the same bytes
    assert part_bytes(hf_store, hf) == part_bytes(fast_store, fast)

    outcome = check_hf_reencode_sample(fast_store, fast.success, STAGE)
    assert outcome.passed, outcome.metadata
    assert outcome.metadata["mismatched_docs"] == 0 and outcome.metadata["texts_not_found_upstream"] == 0
    assert UNITS <= outcome.metadata["sampled_docs"] <= UNITS * (CHECK_SAMPLE_PER_UNIT + 1)
    assert outcome.metadata["encoders_by_unit"] == {backend: UNITS}


class OffByOneOnLongest:
    """HF ids, except that the longest document of each batch gets one token changed in the middle."""

    backend = "off-by-one"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._hf = HFEncoder(tokenizer)

    def encode_flat(self, texts: Sequence[str]) -> Flat:
        values, offsets = self._hf.encode_flat(texts)
        values = values.copy()
        longest = max(range(len(texts)), key=lambda i: offsets[i + 1] - offsets[i])
        middle = (offsets[longest] + offsets[longest + 1]) // 2
        values[middle] = (values[middle] + 1) % 1000
        return values, offsets


def test_check_fails_when_the_encoder_differs_from_hf(tmp_path, monkeypatch, texts, tokenizer_file):
    monkeypatch.setattr(
        tokenize_module,
        "encoder_for",
        lambda sha256, tokenizer: EncoderChoice(OffByOneOnLongest(tokenizer), "test"),
    )
    # each unit samples its longest document (by default every 8th does, under a cap some real pages exceed)
    monkeypatch.setattr(tokenize_module, "CHECK_LONGEST_MAX_TOKENS", 10**9)
    monkeypatch.setattr(tokenize_module, "CHECK_LONG_EVERY_UNITS", 1)
    # workers=1: the units run in this process, where the test's encoder class is importable
    store, outcome = tokenize(tmp_path / "root", texts, tokenizer_file, workers=1)
    result = check_hf_reencode_sample(store, outcome.success, STAGE)
    assert not result.passed
    assert result.metadata["mismatched_docs"] == UNITS  # the longest document of every unit is always sampled
    first = result.metadata["first_mismatch"]
    assert first["encoder"] == "off-by-one" and first["hf_tokens"] == first["stored_tokens"]
    assert 0 < first["token_index"] < first["hf_tokens"] - 1
    assert [c.name for c in STAGE.checks] == ["hf_reencode_sample"] and STAGE.checks[0].blocking


def test_a_sampled_text_missing_upstream_is_counted_and_fails_the_check(
    tmp_path, monkeypatch, texts, tokenizer_file
):
    """The unit's part of the check reads the sampled documents' texts from the parts the unit read: a written
    document whose text is not there is counted, and one such unit fails the check."""
    monkeypatch.setattr(tokenize_module, "CHECK_TOKENS_PER_UNIT", 10**9)  # the first document is sampled
    store, outcome = tokenize(tmp_path / "root", texts[:40], tokenizer_file)
    marker = store.read_json(layout.unit_marker(outcome.prefix, outcome.success.units[0]))
    written = [store.local_path(layout.in_output(outcome.prefix, name)) for name in marker["parts"]]
    upstream = marker["inputs"][0]
    stored, found = tokenize_module._written_sample(store, written, [upstream], with_longest=False)
    assert stored and set(found) == set(stored)
    table = pq.read_table(store.local_path(upstream))
    pq.write_table(table.slice(1), store.local_path(upstream))  # the first document's text is gone
    stored, found = tokenize_module._written_sample(store, written, [upstream], with_longest=False)
    assert len(stored) - len(found) == 1

    findings = outcome.success.unit_checks["hf_reencode_sample"]
    assert all(finding["missing"] == 0 for finding in findings)
    missing = [{**findings[0], "missing": 1}, *findings[1:]]
    result = check_hf_reencode_sample(
        store, replace(outcome.success, unit_checks={"hf_reencode_sample": missing}), STAGE
    )
    assert not result.passed and result.metadata["texts_not_found_upstream"] == 1
    unchecked = [None, *findings[1:]]  # a unit without the check's findings (committed by older code)
    result = check_hf_reencode_sample(
        store, replace(outcome.success, unit_checks={"hf_reencode_sample": unchecked}), STAGE
    )
    assert not result.passed and result.metadata["units_not_checked"] == 1


def test_the_check_finds_the_same_on_two_workers_as_in_process(tmp_path, texts, tokenizer_file):
    _, in_process = tokenize(tmp_path / "one", texts, tokenizer_file, workers=1)
    store, on_workers = tokenize(tmp_path / "two", texts, tokenizer_file, workers=2)
    assert len(on_workers.success.units) >= 2 and "worker" in on_workers.success.cost["units_where"]
    assert on_workers.success.unit_checks == in_process.success.unit_checks
    outcome = check_hf_reencode_sample(store, on_workers.success, STAGE)
    assert outcome.passed and outcome.metadata["units_not_checked"] == 0
    assert outcome.metadata["sampled_docs"] >= len(on_workers.success.units)


def test_the_sample_is_bounded_in_tokens_and_its_long_document_is_capped() -> None:
    """HF re-encodes ~12x slower than the stage's encoder: evenly spaced documents while they fit the unit's
    token budget, and on the units that check long inputs the longest document under the cap."""
    from fm_assets.stages.tokenize import CHECK_LONGEST_MAX_TOKENS as CAP
    from fm_assets.stages.tokenize import CHECK_TOKENS_PER_UNIT as BUDGET
    from fm_assets.stages.tokenize import sample_positions, sample_rows

    n_tokens = np.full(64, 100, dtype=np.int32)
    n_tokens[5] = CAP + 1  # a page over the cap: never re-encoded
    n_tokens[9] = CAP  # the longest under it
    n_tokens[0] = BUDGET  # an evenly spaced one bigger than what is left of the budget after it
    evenly = sample_positions(64, CHECK_SAMPLE_PER_UNIT)
    assert 0 in evenly and 5 not in evenly and 9 not in evenly
    assert sample_rows(n_tokens, with_longest=False) == {0}  # the first takes the whole budget
    n_tokens[0] = BUDGET - 100 * (len(evenly) - 2)  # now all but the last one fit
    short = sample_rows(n_tokens, with_longest=False)
    assert short == set(evenly[:-1])
    assert sum(int(n_tokens[p]) for p in short) <= BUDGET
    assert sample_rows(n_tokens, with_longest=True) == short | {9}
    n_tokens[:] = BUDGET + 1  # nothing fits: the shortest candidate (the first, on a tie) still goes
    assert sample_rows(n_tokens, with_longest=False) == {0}
    assert sample_rows(np.zeros(0, dtype=np.int32), with_longest=True) == set()


def test_every_eighth_unit_checks_its_longest_document(tmp_path, monkeypatch, texts, tokenizer_file):
    monkeypatch.setattr(tokenize_module, "CHECK_LONGEST_MAX_TOKENS", 10**9)
    monkeypatch.setattr(
        tokenize_module,
        "encoder_for",
        lambda sha256, tokenizer: EncoderChoice(OffByOneOnLongest(tokenizer), "test"),
    )
    monkeypatch.setattr(tokenize_module, "CHECK_TOKENS_PER_UNIT", 0)  # the evenly spaced: the shortest only
    store, outcome = tokenize(tmp_path / "root", texts, tokenizer_file, workers=1)
    result = check_hf_reencode_sample(store, outcome.success, STAGE)
    assert result.metadata["mismatched_docs"] == 1  # unit 0 of 3 (every 8th from the first) has its longest


def test_an_encoder_chosen_in_the_background_is_the_one_tokenize_uses(
    tmp_path, monkeypatch, texts, tokenizer_file
):
    from fm_assets.transforms.tokens import encoder as encoder_module

    built: list[str] = []

    def counting_build(tokenizer: Tokenizer, *args: object) -> EncoderChoice:
        built.append("build")
        return build_encoder(tokenizer)

    monkeypatch.setattr(encoder_module, "_CHOICES", {})
    monkeypatch.setattr(encoder_module, "build_encoder", counting_build)
    store = ObjectStore(str(tmp_path / "root"))
    registry = TokenizerRegistry(store)
    sha = registry.register_file(tokenizer_file)
    registry.pin(sha, origin="test")
    thread = tokenize_module.choose_encoder_in_background(store)
    thread.join(timeout=60)
    assert not thread.is_alive() and built == ["build"]
    ahead = encoder_module._CHOICES[sha]
    _, outcome = tokenize(tmp_path / "root", texts, tokenizer_file)  # pins the same file again
    assert built == ["build"]  # prepare found the choice made: not built again
    assert outcome.success.artifacts["encoder"]["backend"] == ahead.backend


def test_without_a_pinned_tokenizer_the_background_choice_gives_up_quietly(tmp_path, monkeypatch) -> None:
    from fm_assets.transforms.tokens import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "_CHOICES", {})
    thread = tokenize_module.choose_encoder_in_background(ObjectStore(str(tmp_path / "empty")))
    thread.join(timeout=60)
    assert not thread.is_alive() and encoder_module._CHOICES == {}
