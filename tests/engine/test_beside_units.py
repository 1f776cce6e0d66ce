"""Driver work handed over by ``prepare`` runs while the units run (``engine.beside_units``): ``complete``
sees it done, its error fails the stage, and a stage whose units fail still waits for it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine import layout
from fm_assets.engine.beside_units import beside_units, run_beside_units
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore

UNITS = 3


class Overlapping(Stage):
    """Its prepare hands over work that waits until every unit started; its complete reports what the work
    saw. ``fail`` names what fails: the work beside the units, or a unit."""

    name = "overlapping"
    code_version = "overlapping-v1"
    upstream = None
    output_schema = pa.schema([("doc_id", pa.string())])

    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.units_started = threading.Semaphore(0)
        self.seen: dict[str, Any] = {}

    def config(self, ctx: StageContext) -> dict:
        return {"fail": self.fail}

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        return [WorkUnit(f"u{i:05d}", ()) for i in range(UNITS)]

    def prepare(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> None:
        main = threading.get_ident()

        def work() -> None:
            # the units run in-process on the main thread: this returns only if they run meanwhile
            for _ in range(UNITS):
                assert self.units_started.acquire(timeout=30), "the units did not run beside the work"
            time.sleep(0.2)  # outlasts the units: complete must still wait for it
            self.seen["other_thread"] = threading.get_ident() != main
            if self.fail == "work":
                raise RuntimeError("the work beside the units failed")
            self.seen["done"] = True

        run_beside_units(work)

    def process(self, unit: UnitContext) -> UnitResult:
        self.units_started.release()
        if self.fail == "unit" and unit.unit.unit_id == f"u{UNITS - 1:05d}":
            raise ValueError("a unit failed")
        unit.writer.write_table(pa.table({"doc_id": [unit.unit.unit_id]}))
        return UnitResult(records_in=1, records_out=1)

    def complete(self, ctx, prepared, output_prefix, markers) -> dict:
        return {"work_done_before_complete": self.seen.get("done", False)}


def run(tmp_path, stage: Overlapping) -> Any:
    store = ObjectStore(str(tmp_path / "root"))
    settings = PipelineConfigResource(progress=False, near_dedup=False, workers=1)
    return store, run_stage(stage, StageContext(store, "b", settings))


def test_work_runs_while_the_units_run_and_before_complete(tmp_path) -> None:
    stage = Overlapping()
    _, outcome = run(tmp_path, stage)
    assert stage.seen == {"other_thread": True, "done": True}
    assert outcome.success.artifacts["work_done_before_complete"] is True
    assert outcome.success.counts.records_out == UNITS


def test_the_work_s_error_fails_the_stage_without_a_success_marker(tmp_path) -> None:
    stage = Overlapping(fail="work")
    with pytest.raises(RuntimeError, match="beside the units failed"):
        run(tmp_path, stage)
    assert not list((tmp_path / "root").rglob(layout.SUCCESS))


def test_failed_units_still_wait_for_the_work(tmp_path) -> None:
    stage = Overlapping(fail="unit")
    with pytest.raises(Exception, match="a unit failed"):
        run(tmp_path, stage)
    assert stage.seen.get("done") is True  # it had finished when run_stage raised: nothing writes later


def test_outside_a_stage_run_the_work_runs_at_once() -> None:
    ran: list[int] = []
    run_beside_units(lambda: ran.append(threading.get_ident()))
    assert ran == [threading.get_ident()]


def test_a_scope_runs_nothing_until_started_and_its_errors_surface() -> None:
    ran: list[str] = []
    with beside_units("t") as beside:
        run_beside_units(lambda: ran.append("first"))
        run_beside_units(lambda: ran.append("second"))
        assert ran == []
        beside.start()
        beside.wait()
    assert ran == ["first", "second"]
    with pytest.raises(KeyError), beside_units("t") as beside:
        run_beside_units(lambda: {}["missing"])
        beside.start()
    assert ran == ["first", "second"]
