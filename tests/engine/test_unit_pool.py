"""Units on a pool of worker processes: 1, 2 or 3 workers write byte-identical output, a unit's failure in a
worker names the unit and keeps the stage resumable, contract errors keep their type, a dead worker or a
killed parent leaves nothing half-committed."""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pool_helpers import (
    CHAIN,
    DyingFilter,
    EchoJob,
    FlakyFilter,
    LeakyFilter,
    SaltedFilter,
    committed_units,
    fingerprint,
    land_sample,
    pid_after_sleeping,
    pid_and_square,
    run_chain,
    run_one,
    settings,
    units_then_return,
)

from fm_assets.engine.pool import (
    RemoteTraceback,
    UnitFailedError,
    UnitTask,
    WorkerLostError,
    cgroup_cpu_quota,
    dump_job,
    map_on_workers,
    metered_spread,
    resolve_workers,
    run_on_processes,
    shared_pool,
    shutdown_pools,
    spread_over,
    start_workers,
)
from fm_assets.engine.records import UnitMarker
from fm_assets.engine.run import (
    NonDeterministicStageError,
    StageContractError,
    StageRun,
    StageUnits,
    UnitJob,
    runtime_patches,
)
from fm_assets.engine.stage import StageContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import PipelineSettings, load_settings
from fm_assets.stages.filter import STAGE as FILTER
from fm_assets.stages.filter import FilterStage
from fm_assets.stages.land import STAGE as LAND
from fm_assets.stages.pack import STAGE as PACK
from fm_assets.stages.shard import STAGE as SHARD

HERE = Path(__file__).resolve().parent
UpstreamCopy = Callable[[str], ObjectStore]


def without_run_counts(success: dict[str, Any]) -> dict[str, Any]:
    """_SUCCESS.json without how this attempt got there (units computed vs resumed)."""
    return {k: v for k, v in success.items() if k not in ("units_computed", "units_skipped")}


# -- settings and what crosses into a worker (fast) ------------------------------------------------------


def test_workers_default_to_every_core_and_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FM_WORKERS", raising=False)
    monkeypatch.delenv("FM_UNIT_EXECUTOR", raising=False)
    default = load_settings()
    assert default.workers == 0 and default.unit_executor == "local"
    assert resolve_workers(0) == len(os.sched_getaffinity(0)) and resolve_workers(3) == 3
    monkeypatch.setenv("FM_WORKERS", "3")
    monkeypatch.setenv("FM_UNIT_EXECUTOR", "spark")
    configured = load_settings()
    assert (configured.pipeline().workers, configured.pipeline().unit_executor) == (3, "spark")
    monkeypatch.setenv("FM_UNIT_EXECUTOR", "threads")
    with pytest.raises(ValueError, match="unit_executor"):
        load_settings()


def test_every_core_respects_a_cgroup_cpu_limit(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")
    assert cgroup_cpu_quota(cpu_max) is None
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs: two workers
    assert cgroup_cpu_quota(cpu_max) == 2
    assert cgroup_cpu_quota(tmp_path / "missing") is None


def test_how_units_run_is_not_in_any_stage_key(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path))
    one = StageContext(store, "b", settings(workers=1))
    many = StageContext(store, "b", settings(workers=7, unit_executor="spark"))
    for stage in (LAND, FILTER, PACK, SHARD):
        assert stage.config(one) == stage.config(many)
    keys = {
        StageRun(
            store, stage="filter", batch="b", code_version="v", config=FILTER.config(ctx), input_versions={}
        ).key
        for ctx in (one, many)
    }
    assert len(keys) == 1


def test_a_worker_gets_the_context_without_resources_and_with_plain_settings(tmp_path: Path) -> None:
    ctx = StageContext(
        ObjectStore(str(tmp_path)), "b", settings(workers=2), {"spark": object(), "blocklists": 1}
    )
    crossed = pickle.loads(pickle.dumps(StageUnits(FILTER, ctx, {"decided": 1})))
    assert type(crossed.stage) is FilterStage and crossed.prepared == {"decided": 1}
    assert type(crossed.ctx.settings) is PipelineSettings
    assert crossed.ctx.settings.model_dump() == PipelineSettings(**ctx.settings.model_dump()).model_dump()
    assert "spark" in crossed.ctx.resources and sorted(crossed.ctx.resources) == ["blocklists", "spark"]
    with pytest.raises(RuntimeError, match=r"resource 'spark' is not available .* prepare\(\)"):
        crossed.ctx.resource("spark")


def test_a_stage_patched_at_run_time_keeps_its_units_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ObjectStore(str(tmp_path))
    run = StageRun(
        store, stage="filter", batch="b", code_version="v", config={}, input_versions={}, workers=2
    )
    ctx = StageContext(store, "b", settings())
    assert runtime_patches(FilterStage) == []
    assert isinstance(dump_job(UnitJob(run, StageUnits(FILTER, ctx, None))), bytes)

    def judge(self: Any, ctx: Any, record: Any, metrics: Any) -> Any:
        raise AssertionError("never called here")

    monkeypatch.setattr(FilterStage, "judge", judge)
    assert runtime_patches(FilterStage) == ["FilterStage.judge"]
    reason = dump_job(UnitJob(run, StageUnits(FILTER, ctx, None)))
    assert isinstance(reason, str) and "FilterStage.judge" in reason


TOY_SCHEMA = pa.schema([("doc_id", pa.string()), ("text", pa.string())])


def _toy_process(unit: WorkUnit, writer: Any, prefix: str) -> UnitResult:
    for i in range(3):
        writer.write({"doc_id": f"{unit.unit_id}-{i}", "text": "x"})
    return UnitResult(records_in=3)


def test_an_unpicklable_process_runs_in_process_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    units = [WorkUnit(f"u{i}", ()) for i in range(3)]
    kwargs: dict[str, Any] = dict(
        stage="toy",
        batch="b",
        code_version="v",
        config={},
        input_versions={},
        output_schema=TOY_SCHEMA,
        progress=False,
    )
    with caplog.at_level(logging.WARNING, logger="fm_assets.engine.run"):
        outcome = StageRun(ObjectStore(str(tmp_path / "a")), workers=2, **kwargs).execute(
            units, lambda unit, writer, prefix: _toy_process(unit, writer, prefix)
        )
    assert "cannot go to worker processes" in caplog.text
    reference = StageRun(ObjectStore(str(tmp_path / "b")), workers=1, **kwargs).execute(units, _toy_process)
    assert outcome.units_computed == 3 and outcome.data_version == reference.data_version


def test_in_process_errors_propagate_as_raised_with_the_unit_in_a_note(tmp_path: Path) -> None:
    def failing(unit: WorkUnit, writer: Any, prefix: str) -> UnitResult:
        raise KeyError("boom")

    run = StageRun(
        ObjectStore(str(tmp_path)), stage="toy", batch="b", code_version="v", config={}, input_versions={}
    )
    with pytest.raises(KeyError) as raised:
        run.execute([WorkUnit("u7", ())], failing)
    assert any("unit u7" in note for note in raised.value.__notes__)


# -- the pool itself (worker processes: slow) -------------------------------------------------------------


@pytest.mark.slow
def test_the_pool_reports_every_unit_once_and_a_failure_by_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = [UnitTask(i, WorkUnit(f"u{i:02d}", (f"in-{i}",))) for i in range(12)]
    done: dict[int, UnitMarker] = {}
    advanced: list[int] = []
    payload = dump_job(EchoJob())
    assert isinstance(payload, bytes)
    run_on_processes(
        "echo[b]",
        payload,
        tasks,
        2,
        lambda task, marker: done.update({task.index: marker}),
        advanced.append,
    )
    assert sorted(done) == list(range(12)) and advanced == [1] * 12  # the progress bar moves per unit
    assert all(done[i].unit == f"u{i:02d}" and done[i].inputs == [f"in-{i}"] for i in range(12))
    assert os.getpid() not in {marker.extra["pid"] for marker in done.values()}

    bad = [*tasks[:3], UnitTask(3, WorkUnit("bad", ()))]
    with pytest.raises(UnitFailedError) as raised:
        run_on_processes("echo[b]", payload, bad, 2, lambda task, marker: None, lambda n: None)
    error = raised.value
    assert error.unit_id == "bad" and error.error_type == "builtins.ValueError"
    assert "echo[b] unit bad failed in pid" in str(error) and "planted failure while processing bad" in str(
        error
    )
    assert "explode_in_unit" in error.remote_traceback and isinstance(error.__cause__, RemoteTraceback)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)  # travels (Dagster, a parent pool) intact

    # a job whose code the worker cannot import fails its units by name instead of killing the worker
    ghost = types.ModuleType("fm_ghost_jobs")
    ghost_job = type("GhostJob", (EchoJob,), {"__module__": "fm_ghost_jobs"})
    ghost.GhostJob = ghost_job  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fm_ghost_jobs", ghost)
    ghost_payload = dump_job(ghost_job())
    assert isinstance(ghost_payload, bytes)
    with pytest.raises(
        UnitFailedError, match=r"unit u00 failed .* did not load in the worker: No module named"
    ):
        run_on_processes("ghost[b]", ghost_payload, tasks[:1], 2, lambda task, marker: None, lambda n: None)


def test_a_spawned_process_that_used_the_pool_exits_when_its_target_returns() -> None:
    """Dagster's code server runs each run worker as a ``spawn`` child; its exit handler joins live children
    before the interpreter shuts down, so idle pool workers used to keep a finished run worker (and
    themselves: ~1.9 GB) alive forever."""
    context = multiprocessing.get_context("spawn")
    pids = context.Queue()
    child = context.Process(target=units_then_return, args=(pids,))
    child.start()
    try:
        workers = pids.get(timeout=120)
        started = time.monotonic()
        child.join(20)
        assert not child.is_alive(), (
            "the process that used the unit pool did not exit after its target returned"
        )
        assert child.exitcode == 0
        assert time.monotonic() - started < 10
        assert workers and child.pid not in workers
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in workers), "pool workers outlived their exited parent"
    finally:
        if child.is_alive():
            child.kill()
            child.join(10)


@pytest.mark.slow
def test_land_to_filter_with_1_2_3_workers_is_byte_identical(
    tmp_path: Path, real_sample: dict, caplog: pytest.LogCaptureFixture
) -> None:
    prints = {}
    with caplog.at_level(logging.INFO, logger="fm_assets.engine.run"):
        for workers in (1, 2, 3):
            store = land_sample(tmp_path / f"w{workers}", real_sample)
            outcomes = run_chain(store, settings(workers=workers))
            assert not any(outcome.cache_hit for outcome in outcomes.values())
            prints[workers] = {stage: fingerprint(store, stage) for stage in CHAIN}
    for stage in CHAIN:
        assert len(prints[1][stage]["markers"]) >= 6, stage
        assert prints[2][stage] == prints[1][stage], stage
        assert prints[3][stage] == prints[1][stage], stage
    # the pool really ran them (not a silent in-process fallback)
    assert "filter[b-pool]: " in caplog.text
    for workers in (2, 3):
        assert f"on {workers} worker processes" in caplog.text
    assert "cannot go to worker processes" not in caplog.text


@pytest.mark.slow
def test_a_failure_in_a_worker_names_the_unit_and_a_rerun_skips_what_was_committed(
    upstream_copy: UpstreamCopy, clean_filter: dict
) -> None:
    store = upstream_copy("flaky")
    units = sorted(clean_filter["markers"])
    flaky = FlakyFilter()
    flaky.fail_unit = units[-1]
    with pytest.raises(UnitFailedError) as raised:
        run_one(store, flaky, settings(workers=2))
    error = raised.value
    assert error.unit_id == units[-1] and f"unit {units[-1]} failed in pid" in str(error)
    assert "ValueError: planted failure" in str(error) and "explode_in_unit" in error.remote_traceback

    prefix = clean_filter["success"]["prefix"]
    committed = committed_units(store, prefix)
    assert units[-1] not in committed and len(committed) >= len(units) - 2
    assert not store.exists(f"{prefix}/_SUCCESS.json")

    # the re-run recomputes the committed units too (in the workers, without committing) and finds them equal
    resumed = run_one(store, FILTER, settings(workers=2, verify_committed_units=True))
    assert resumed.prefix == prefix
    assert resumed.units_skipped == len(committed) and resumed.units_computed == len(units) - len(committed)
    after = fingerprint(store, "filter")
    assert after["data_version"] == clean_filter["data_version"]
    assert after["markers"] == clean_filter["markers"] and after["files"] == clean_filter["files"]
    assert without_run_counts(after["success"]) == without_run_counts(clean_filter["success"])


@pytest.mark.slow
def test_contract_errors_from_workers_keep_their_type(
    upstream_copy: UpstreamCopy, clean_filter: dict
) -> None:
    units = sorted(clean_filter["markers"])
    prefix = clean_filter["success"]["prefix"]

    with pytest.raises(StageContractError, match=r"unit [\w-]+: records_in=\d+ != records_out") as leaked:
        run_one(upstream_copy("leaky"), LeakyFilter(), settings(workers=2))
    assert type(leaked.value) is StageContractError and isinstance(leaked.value.__cause__, RemoteTraceback)

    store = upstream_copy("impure")
    flaky = FlakyFilter()
    flaky.fail_unit = units[-1]
    with pytest.raises(UnitFailedError):
        run_one(store, flaky, settings(workers=2))
    # recomputing committed units with different output: caught by the parent's comparison ...
    with pytest.raises(NonDeterministicStageError, match="not a pure function"):
        run_one(store, SaltedFilter(), settings(workers=2, verify_committed_units=True))
    # ... and a file left by a dead attempt that differs: caught in the worker, raised as itself
    dropped = committed_units(store, prefix)[0]
    store.delete(f"{prefix}/_units/{dropped}.json")
    with pytest.raises(NonDeterministicStageError, match=f"unit {dropped}: .* interrupted attempt"):
        run_one(store, SaltedFilter(), settings(workers=2))


@pytest.mark.slow
def test_a_worker_that_dies_fails_the_stage_and_a_rerun_completes_it(
    upstream_copy: UpstreamCopy, clean_filter: dict
) -> None:
    store = upstream_copy("dying")
    dying = DyingFilter()
    dying.die_unit = sorted(clean_filter["markers"])[1]
    with pytest.raises(WorkerLostError, match="worker process died"):
        run_one(store, dying, settings(workers=2))
    assert dying.die_unit not in committed_units(store, clean_filter["success"]["prefix"])
    run_one(store, FILTER, settings(workers=2))  # a fresh pool replaces the broken one
    assert fingerprint(store, "filter")["data_version"] == clean_filter["data_version"]


KILL_SCRIPT = """
import sys
from fm_assets.engine.store import ObjectStore
from pool_helpers import SlowFilter, run_one, settings

if __name__ == "__main__":
    stage = SlowFilter()
    stage.pid_dir = sys.argv[2]
    run_one(ObjectStore(sys.argv[1]), stage, settings(workers=2))
"""


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.slow
def test_kill_minus_nine_of_the_parent_stops_its_workers_and_resume_skips_committed(
    upstream_copy: UpstreamCopy, clean_filter: dict, tmp_path: Path
) -> None:
    store = upstream_copy("killed")
    prefix = clean_filter["success"]["prefix"]
    pids = tmp_path / "pids"
    pids.mkdir()
    script = tmp_path / "slow_filter.py"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(script), store.root, str(pids)], env=env, stderr=subprocess.PIPE
    )
    deadline = time.time() + 300
    while len(committed_units(store, prefix)) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    workers = [int(p.name) for p in pids.iterdir()]
    assert workers and proc.pid not in workers  # the units ran in worker processes
    deadline = time.time() + 20
    while any(_alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers), "workers outlived their killed parent"
    committed = committed_units(store, prefix)
    time.sleep(1.0)
    assert committed_units(store, prefix) == committed  # nothing commits after the parent died
    assert 2 <= len(committed) < len(clean_filter["markers"])

    resumed = run_one(store, FILTER, settings(workers=1))
    assert resumed.units_skipped == len(committed)
    assert resumed.units_computed == len(clean_filter["markers"]) - len(committed)
    after = fingerprint(store, "filter")
    assert after["data_version"] == clean_filter["data_version"] and after["files"] == clean_filter["files"]


def test_map_on_workers_runs_on_the_pool_only_inside_spread_over_and_keeps_item_order() -> None:
    items = list(range(12))
    in_process = map_on_workers(pid_and_square, items)
    assert {pid for pid, _ in in_process} == {os.getpid()}
    with spread_over(2):
        spread = map_on_workers(pid_and_square, items)
    assert [square for _, square in spread] == [i * i for i in items] == [square for _, square in in_process]
    assert os.getpid() not in {pid for pid, _ in spread}
    with spread_over(1):
        assert {pid for pid, _ in map_on_workers(pid_and_square, items)} == {os.getpid()}


def test_metered_spread_counts_the_tasks_and_their_own_seconds_on_the_pool_and_in_process() -> None:
    map_on_workers(pid_after_sleeping, [0.01, 0.01])  # outside any meter: counted nowhere
    with spread_over(2):
        map_on_workers(pid_after_sleeping, [0.01, 0.01])  # the pool started, outside any meter
    with metered_spread() as outer:
        with spread_over(2), metered_spread() as on_pool:
            pids = map_on_workers(pid_after_sleeping, [0.1] * 4)
        with metered_spread() as in_process:
            map_on_workers(pid_after_sleeping, [0.05] * 3)
    assert os.getpid() not in pids
    assert on_pool.tasks == 4 and 0.4 <= on_pool.task_seconds < 2.0  # each task's own wall, not the wait
    assert in_process.tasks == 3 and 0.15 <= in_process.task_seconds < 1.0
    assert outer.tasks == 7 and outer.task_seconds == pytest.approx(
        on_pool.task_seconds + in_process.task_seconds
    )
    # the wall the caller waited: 4 tasks of 0.1 s on 2 workers take about half their seconds
    assert 0.2 <= on_pool.wall_seconds < on_pool.task_seconds
    assert in_process.wall_seconds >= in_process.task_seconds
    assert outer.wall_seconds == pytest.approx(on_pool.wall_seconds + in_process.wall_seconds)
    with metered_spread(in_process) as again:  # a meter given back: the counts add up
        map_on_workers(pid_after_sleeping, [0.01])
    assert again is in_process and in_process.tasks == 4


def test_start_workers_forks_the_pool_before_any_unit_and_the_units_reuse_it() -> None:
    shutdown_pools()
    assert start_workers(1) is None  # one worker: the units run in this process
    starting = start_workers(3)
    assert starting is not None
    starting.join(timeout=120)
    with shared_pool(3) as pool:
        deadline = time.monotonic() + 120
        while len(pool.executor._processes) < 3 and time.monotonic() < deadline:  # forked without waiting
            time.sleep(0.05)
        started = set(pool.executor._processes)
    assert len(started) == 3
    with spread_over(3):
        ran_on = {pid for pid, _ in map_on_workers(pid_and_square, list(range(12)))}
    assert ran_on <= started
    shutdown_pools()


def test_largest_units_go_to_the_pool_first_and_ties_keep_unit_order() -> None:
    from fm_assets.engine.run import largest_first

    sizes = {"p0": 100, "p1": 4_000, "p2": 4_000, "p3": 250, "p4": 3_000}
    tasks = [UnitTask(i, WorkUnit(f"u{i}", (f"p{i}",))) for i in range(5)]
    tasks.append(UnitTask(5, WorkUnit("u5", ("p0", "p3"))))  # a unit reading two parts: their sum
    tasks.append(UnitTask(6, WorkUnit("u6", ("unknown",))))  # a size not recorded counts 0
    assert [task.unit.unit_id for task in largest_first(tasks, sizes)] == [
        "u1",
        "u2",
        "u4",
        "u5",
        "u3",
        "u0",
        "u6",
    ]
    # rows weigh in where they are known: 25 rows of p0 (100 + 25 x 400 bytes) outweigh p1's 4,000 bytes
    from fm_assets.engine.run import ROW_WEIGHT_BYTES

    rows = {"p0": 25, "p1": 1, "p2": 1}
    assert 100 + 25 * ROW_WEIGHT_BYTES > 4_000 + ROW_WEIGHT_BYTES
    assert [task.unit.unit_id for task in largest_first(tasks, sizes, rows)][:4] == ["u5", "u0", "u1", "u2"]


def test_the_unit_writer_counts_the_rows_of_each_part(tmp_path) -> None:
    import pyarrow.parquet as pq

    from fm_assets.engine.unit_writer import UnitWriter

    writer = UnitWriter(tmp_path, "u0", pa.schema([("text", pa.string())]), rows_per_file=3)
    for i in range(7):
        writer.write({"text": f"row {i}"})
    writer.close()
    assert writer.part_rows == [3, 3, 1]
    assert [pq.read_metadata(path).num_rows for path in writer.part_files] == writer.part_rows


def test_map_on_workers_reuses_a_smaller_running_pool_instead_of_forking_another() -> None:
    shutdown_pools()
    with spread_over(2):  # a stage with 2 units ran on a pool of 2
        first = {pid for pid, _ in map_on_workers(pid_and_square, list(range(8)))}
    with spread_over(4):  # driver-side work of a stage configured for 4 workers
        again = {pid for pid, _ in map_on_workers(pid_and_square, list(range(8)))}
    assert again <= first and len(first) <= 2
    shutdown_pools()
