"""The blocking contamination check catches eval text in decontaminate's output without re-scanning it all:
each unit re-reads a sample of the parts it wrote (``rescan_written``), the check judges their findings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine.records import Counts, StageSuccess
from fm_assets.engine.run import run_stage
from fm_assets.engine.schemas import DOC_SCHEMA
from fm_assets.engine.stage import SideInputs, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import PipelineSettings
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.stages.decontaminate import (
    CHECK_NAME,
    CHECK_SAMPLE_PER_PART,
    STAGE,
    check_no_contamination,
    rescan_written,
)
from fm_assets.transforms.text.decontam import load_eval_texts


def doc(i: int, text: str) -> dict:
    return {
        "doc_id": f"d:{i}", "batch": "b", "source": "s", "license": "MIT", "namespace": "cloud",
        "cas_hash": "0" * 64, "record_index": i, "url": None, "text": text, "lang": "en",
        "lang_score": 1.0, "quality_score": 1.0, "pii_flags": None,
    }  # fmt: skip


def written_parts(folder: Path, texts: list[str], parts: int = 1) -> list[Path]:
    """``texts`` as a unit's written part files, dealt round-robin over ``parts``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for p in range(parts):
        rows = [doc(i, t) for i, t in enumerate(texts) if i % parts == p]
        path = folder / f"part-u0-{p}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=DOC_SCHEMA), path)
        paths.append(path)
    return paths


def unit_findings_for(store: ObjectStore, paths: list[Path], **settings: object) -> dict[str, int]:
    """What one unit of the stage finds re-scanning ``paths`` (the stage's index and settings)."""
    context = StageContext(
        store, "b", PipelineSettings(progress=False, **settings), side=SideInputs(data=EvalRegistry().index())
    )  # type: ignore[arg-type]
    unit = UnitContext(STAGE, context, WorkUnit("u0", ()), None, "stages/decontaminate/b/k")  # type: ignore[arg-type]
    return rescan_written(unit, UnitResult(), paths)


def output_with(findings: list[dict[str, int] | None], rows: int, scanned: int | None = None) -> StageSuccess:
    return StageSuccess(
        stage="decontaminate", batch="b", key="k", prefix="stages/decontaminate/b/k", code_version="v",
        config={"enabled": True, "min_matches": 1},
        inputs={"eval_index": EvalRegistry().index().fingerprint()}, data_version="x",
        units=[f"u{i}" for i in range(len(findings))], parts=[], rejects=[], counts=Counts(rows, rows, 0, rows, 0),
        rejects_by_reason={}, extra={"eval_scanned_docs": rows if scanned is None else scanned},
        artifacts={"eval_registry": EvalRegistry().spec()}, units_computed=len(findings), units_skipped=0,
        seconds=0.0, unit_checks={CHECK_NAME: findings},
    )  # fmt: skip


CLEAN = "The quick brown fox jumps over the lazy dog while the river keeps flowing past the old mill. " * 3


def test_clean_output_passes(tmp_path):
    store = ObjectStore(str(tmp_path))
    findings = unit_findings_for(store, written_parts(tmp_path / "w", [CLEAN] * 5))
    assert findings == {"rescanned": 5, "matching": 0}
    outcome = check_no_contamination(store, output_with([findings], 5), STAGE)
    assert outcome.passed and outcome.metadata["sample_rescanned"] == 5


def test_eval_text_in_a_written_part_fails(tmp_path):
    store = ObjectStore(str(tmp_path))
    leaked = load_eval_texts()[0]["text"]
    findings = unit_findings_for(
        store, written_parts(tmp_path / "w", [CLEAN] * 7 + [leaked] + [CLEAN] * 4, parts=3)
    )
    assert findings == {"rescanned": 12, "matching": 1}
    outcome = check_no_contamination(
        store, output_with([{"rescanned": 3, "matching": 0}, findings], 15), STAGE
    )
    assert not outcome.passed and outcome.metadata["contaminated_in_sample"] == 1


def test_documents_the_stage_did_not_scan_fail(tmp_path):
    store = ObjectStore(str(tmp_path))
    outcome = check_no_contamination(
        store, output_with([{"rescanned": 3, "matching": 0}], 3, scanned=2), STAGE
    )
    assert not outcome.passed


def test_a_unit_without_findings_fails(tmp_path):
    """A unit committed without the re-scan (older code resumed under the same key) is not taken as clean."""
    store = ObjectStore(str(tmp_path))
    outcome = check_no_contamination(store, output_with([{"rescanned": 3, "matching": 0}, None], 6), STAGE)
    assert not outcome.passed and outcome.metadata["units_not_rescanned"] == 1
    missing = replace(output_with([{"rescanned": 3, "matching": 0}], 6), units=["u0", "u1"])
    assert check_no_contamination(store, missing, STAGE).metadata["units_not_rescanned"] == 1


def test_a_large_part_is_rescanned_at_most_the_sample_size(tmp_path):
    store = ObjectStore(str(tmp_path))
    rows = CHECK_SAMPLE_PER_PART * 3 - 1  # a floor step (2) would re-scan about 1.5 times the sample
    findings = unit_findings_for(store, written_parts(tmp_path / "w", [CLEAN] * rows))
    assert CHECK_SAMPLE_PER_PART * 2 // 3 <= findings["rescanned"] <= CHECK_SAMPLE_PER_PART


def test_disabled_decontamination_rescans_nothing(tmp_path):
    store = ObjectStore(str(tmp_path))
    paths = written_parts(tmp_path / "w", [load_eval_texts()[0]["text"]])
    assert unit_findings_for(store, paths, decontaminate=False) == {"rescanned": 0, "matching": 0}


def test_the_stage_records_each_units_rescan_the_same_on_one_and_two_workers(tmp_path):
    """Run for real (upstream normalize output written by hand): every unit's findings are in the success,
    identical in process and on two worker processes, and the check passes on them."""
    from fm_assets.engine import layout
    from fm_assets.engine.refs import write_ref

    def root(name: str, workers: int):
        store = ObjectStore(str(tmp_path / name))
        prefix = layout.stage_output("normalize", "b", "k")
        parts = []
        for u in range(3):
            rel = layout.in_output(prefix, layout.part_name(f"u{u}"))
            store.local_path(rel).parent.mkdir(parents=True, exist_ok=True)
            rows = [doc(i, CLEAN + str(i)) for i in range(u * 16, u * 16 + 16)]  # one sample's worth
            pq.write_table(pa.Table.from_pylist(rows, schema=DOC_SCHEMA), store.local_path(rel))
            parts.append(rel)
        upstream = StageSuccess(
            stage="normalize", batch="b", key="k", prefix=prefix, code_version="v", config={}, inputs={},
            data_version="dv", units=["u0", "u1", "u2"], parts=parts, rejects=[], counts=Counts(48, 48, 0, 48, 0),
            rejects_by_reason={}, extra={}, artifacts={}, units_computed=3, units_skipped=0, seconds=0.0,
        )  # fmt: skip
        store.write_json(layout.success_marker(prefix), upstream.to_json())
        write_ref(store, "normalize", "b", upstream, cache_hit=False, wall_seconds=0.0)
        context = StageContext(store, "b", PipelineSettings(progress=False, workers=workers))  # type: ignore[arg-type]
        context = replace(context, resources={"eval_registry": EvalRegistry()})
        return store, run_stage(STAGE, context)

    _, in_process = root("one", 1)
    store, on_workers = root("two", 2)
    assert "worker" in on_workers.success.cost["units_where"]
    findings = on_workers.success.unit_checks[CHECK_NAME]
    assert findings == in_process.success.unit_checks[CHECK_NAME]
    assert [f["rescanned"] for f in findings] == [16] * 3 and CHECK_SAMPLE_PER_PART >= 16
    assert check_no_contamination(store, on_workers.success, STAGE).passed
