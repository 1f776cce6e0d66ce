"""The stage contract engine: cache hits, per-unit resume, accounting and the purity check."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from fm_assets.engine.run import NonDeterministicStageError, StageContractError, StageRun
from fm_assets.engine.schemas import make_doc_id, reject_row
from fm_assets.engine.stage import UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore

UNITS = [WorkUnit(f"u{i}", (f"in-{i}",)) for i in range(4)]


def make_run(store, **overrides):
    kwargs = dict(
        stage="toy",
        batch="b1",
        code_version="v1",
        config={"k": 1},
        input_versions={"up": "abc"},
        progress=False,
    )
    kwargs.update(overrides)
    return StageRun(store, **kwargs)


def toy_process(calls, salt=""):
    def process(unit, writer, prefix):
        calls.append(unit.unit_id)
        for i in range(10):
            record = {
                "doc_id": make_doc_id("ab" * 32, i),
                "batch": "b1",
                "source": "s",
                "license": "MIT",
                "namespace": "cloud",
                "cas_hash": "ab" * 32,
                "record_index": i,
                "url": None,
                "text": f"{unit.unit_id} doc {i}{salt}",
            }
            if i % 3 == 0:
                writer.reject(reject_row(record, batch="b1", stage="toy", reason="every_third"))
            else:
                writer.write(record)
        return UnitResult(records_in=10)

    return process


def test_second_run_is_a_cache_hit_with_same_data_version(tmp_path):
    store = ObjectStore(str(tmp_path))
    calls: list[str] = []
    first = make_run(store).execute(UNITS, toy_process(calls))
    assert not first.cache_hit and first.units_computed == 4
    second = make_run(store).execute(UNITS, toy_process(calls))
    assert second.cache_hit and second.data_version == first.data_version
    assert calls == ["u0", "u1", "u2", "u3"]  # no unit ran twice
    counts = first.success.counts
    assert counts.records_in == 40 and counts.records_rejected == 16 and counts.records_out == 24
    assert first.success.rejects_by_reason == {"every_third": 16}


def test_key_changes_with_code_version_config_and_inputs(tmp_path):
    store = ObjectStore(str(tmp_path))
    keys = {
        make_run(store).key,
        make_run(store, code_version="v2").key,
        make_run(store, config={"k": 2}).key,
        make_run(store, input_versions={"up": "def"}).key,
    }
    assert len(keys) == 4


def test_resume_skips_committed_units_and_output_is_identical(tmp_path):
    store = ObjectStore(str(tmp_path / "a"))
    calls: list[str] = []
    crash_at = "u2"

    def crashing(unit, writer, prefix):
        if unit.unit_id == crash_at:
            raise KeyboardInterrupt("simulated crash")
        return toy_process(calls)(unit, writer, prefix)

    with pytest.raises(KeyboardInterrupt):
        make_run(store).execute(UNITS, crashing)
    assert calls == ["u0", "u1"]
    resumed = make_run(store).execute(UNITS, toy_process(calls))
    assert resumed.units_skipped == 2 and resumed.units_computed == 2
    assert calls == ["u0", "u1", "u2", "u3"]

    clean = make_run(ObjectStore(str(tmp_path / "b"))).execute(UNITS, toy_process([]))
    assert clean.data_version == resumed.data_version


def test_verify_mode_detects_impure_code(tmp_path):
    store = ObjectStore(str(tmp_path))

    def crashing(unit, writer, prefix):
        if unit.unit_id == "u1":
            raise RuntimeError("boom")
        return toy_process([])(unit, writer, prefix)

    with pytest.raises(RuntimeError):
        make_run(store).execute(UNITS, crashing)
    with pytest.raises(NonDeterministicStageError, match="not a pure function"):
        make_run(store, verify_committed=True).execute(UNITS, toy_process([], salt=" changed"))


def test_accounting_mismatch_fails_loudly(tmp_path):
    def leaky(unit, writer, prefix):
        return UnitResult(records_in=5)  # claims 5 records but writes none

    with pytest.raises(StageContractError, match="records_in=5"):
        make_run(ObjectStore(str(tmp_path))).execute(UNITS[:1], leaky)


def test_a_unit_without_rows_by_design_commits_no_part_and_may_not_write_rows(tmp_path):
    store = ObjectStore(str(tmp_path))

    def side_effect_only(unit, writer, prefix):
        return UnitResult(records_in=0, empty_part=unit.unit_id == "u0")

    outcome = make_run(store).execute(UNITS[:2], side_effect_only)
    assert [p.rsplit("/", 1)[1] for p in outcome.success.parts] == ["part-u0.parquet"]  # u1: no empty part
    assert len(outcome.success.units) == 2

    def writes_anyway(unit, writer, prefix):
        result = toy_process([])(unit, writer, prefix)
        return UnitResult(records_in=result.records_in, empty_part=False)

    with pytest.raises(StageContractError, match="writes none"):
        make_run(ObjectStore(str(tmp_path / "other"))).execute(UNITS[:1], writes_anyway)


def test_part_rows_reach_the_success_files_and_the_next_stage_s_unit_order(tmp_path):
    from fm_assets.engine.run import units_read

    store = ObjectStore(str(tmp_path))
    outcome = make_run(store).execute(UNITS, toy_process([]))
    parts = {p.rsplit("/", 1)[1]: p for p in outcome.success.parts}
    assert {name: outcome.success.files[name]["rows"] for name in parts} == {name: 6 for name in parts}
    assert all("rows" not in entry for name, entry in outcome.success.files.items() if name not in parts)
    downstream = make_run(store, stage="next", input_versions={"toy": outcome.data_version})
    units_read(
        downstream, store, outcome.success, [WorkUnit(f"n{i}", (p,)) for i, p in enumerate(parts.values())]
    )
    assert downstream.upstream_rows == {p: 6 for p in parts.values()}


def test_rejects_are_kept_with_reason(tmp_path):
    store = ObjectStore(str(tmp_path))
    outcome = make_run(store).execute(UNITS[:1], toy_process([]))
    rejects = pq.read_table(store.local_path(outcome.success.rejects[0])).to_pylist()
    assert len(rejects) == 4 and {r["reason"] for r in rejects} == {"every_third"}
    assert all(r["text"].startswith("u0 doc") for r in rejects)


def test_leftover_file_from_a_dead_attempt_must_match(tmp_path):
    store = ObjectStore(str(tmp_path))
    run = make_run(store)
    # an earlier attempt wrote u0's part file, then died before the unit's marker
    store.write_bytes(run.rel("part-u0.parquet"), b"not what the code computes now")
    with pytest.raises(NonDeterministicStageError, match="interrupted attempt"):
        run.execute(UNITS[:1], toy_process([]))
