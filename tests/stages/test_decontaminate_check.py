"""The blocking contamination check catches eval text in decontaminate's output without re-scanning it all."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine.pool import spread_over
from fm_assets.engine.records import Counts, StageSuccess
from fm_assets.engine.schemas import DOC_SCHEMA
from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.stages.decontaminate import CHECK_SAMPLE_PER_PART, STAGE, check_no_contamination
from fm_assets.transforms.text.decontam import load_eval_texts


def doc(i: int, text: str) -> dict:
    return {
        "doc_id": f"d:{i}", "batch": "b", "source": "s", "license": "MIT", "namespace": "cloud",
        "cas_hash": "0" * 64, "record_index": i, "url": None, "text": text, "lang": "en",
        "lang_score": 1.0, "quality_score": 1.0, "pii_flags": None,
    }  # fmt: skip


def output_with(
    store: ObjectStore, texts: list[str], scanned: int | None = None, parts: int = 1
) -> StageSuccess:
    rels = [f"stages/decontaminate/b/k/part-u{p}.parquet" for p in range(parts)]
    store.local_path(rels[0]).parent.mkdir(parents=True)
    for p, rel in enumerate(rels):  # documents dealt round-robin over the parts
        rows = [doc(i, t) for i, t in enumerate(texts) if i % parts == p]
        pq.write_table(pa.Table.from_pylist(rows, schema=DOC_SCHEMA), store.local_path(rel))
    n = len(texts)
    return StageSuccess(
        stage="decontaminate", batch="b", key="k", prefix="stages/decontaminate/b/k", code_version="v",
        config={"enabled": True, "min_matches": 1},
        inputs={"eval_index": EvalRegistry().index().fingerprint()}, data_version="x", units=["u0"],
        parts=rels, rejects=[], counts=Counts(n, n, 0, n, 0), rejects_by_reason={},
        extra={"eval_scanned_docs": n if scanned is None else scanned}, artifacts={"eval_registry": EvalRegistry().spec()},
        units_computed=1, units_skipped=0, seconds=0.0,
    )  # fmt: skip


CLEAN = "The quick brown fox jumps over the lazy dog while the river keeps flowing past the old mill. " * 3


def test_clean_output_passes(tmp_path):
    store = ObjectStore(str(tmp_path))
    outcome = check_no_contamination(store, output_with(store, [CLEAN] * 5), STAGE)
    assert outcome.passed and outcome.metadata["sample_rescanned"] == 5


def test_eval_text_in_output_fails(tmp_path):
    store = ObjectStore(str(tmp_path))
    leaked = load_eval_texts()[0]["text"]
    outcome = check_no_contamination(store, output_with(store, [CLEAN, leaked, CLEAN]), STAGE)
    assert not outcome.passed and outcome.metadata["contaminated_in_sample"] == 1


def test_documents_the_stage_did_not_scan_fail(tmp_path):
    store = ObjectStore(str(tmp_path))
    outcome = check_no_contamination(store, output_with(store, [CLEAN] * 3, scanned=2), STAGE)
    assert not outcome.passed


def test_parts_rescanned_on_two_workers_give_the_in_process_outcome(tmp_path):
    store = ObjectStore(str(tmp_path))
    leaked = load_eval_texts()[0]["text"]
    success = output_with(store, [CLEAN] * 7 + [leaked] + [CLEAN] * 4, parts=3)
    in_process = check_no_contamination(store, success, STAGE)
    with spread_over(2):
        on_workers = check_no_contamination(store, success, STAGE)
    assert not in_process.passed and in_process.metadata["contaminated_in_sample"] == 1
    assert in_process.metadata["sample_rescanned"] == 12
    assert on_workers == in_process


def test_a_large_part_is_rescanned_at_most_the_sample_size(tmp_path):
    store = ObjectStore(str(tmp_path))
    rows = CHECK_SAMPLE_PER_PART * 3 - 1  # a floor step (2) would re-scan about 1.5 times the sample
    outcome = check_no_contamination(store, output_with(store, [CLEAN] * rows), STAGE)
    assert outcome.passed
    assert CHECK_SAMPLE_PER_PART * 2 // 3 <= outcome.metadata["sample_rescanned"] <= CHECK_SAMPLE_PER_PART
