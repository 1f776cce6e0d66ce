"""The stage executor: content-addressed, resumable, accounted execution of one stage for one partition.

A stage's output lives at ``stages/<stage>/<batch>/<key>/`` where ``key`` hashes (code version, config,
input data versions). Work is cut into deterministic units; each unit writes ``part-<unit>*.parquet`` and
``rejects-<unit>.parquet`` and then its marker ``_units/<unit>.json`` (the unit's commit).
``_SUCCESS.json`` is written last and makes the whole output a cache hit for every later
materialization with the same key. No Dagster import here: the Dagster layer wraps ``run_stage``.

Units run in-process (``workers=1``), on a pool of local worker processes (``FM_WORKERS``, default every
core) or as Spark tasks (``FM_UNIT_EXECUTOR=spark``); see ``engine.pool``. Wherever a unit runs it commits
itself with ``StageRun._compute_unit``; markers are put back in unit order, so the output, ``_SUCCESS.json``
and the data version do not depend on how many workers ran it.
"""

from __future__ import annotations

import inspect
import logging
import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import pyarrow as pa

from fm_assets.engine import layout
from fm_assets.engine.beside_units import beside_units
from fm_assets.engine.checks import run_in_unit_checks
from fm_assets.engine.hashing import sha256_file, stable_hash
from fm_assets.engine.integrity import (
    DamagedDataError,
    check_output,
    damage_message,
    describe_output,
    expected_files,
    require_intact,
    verify_inputs,
)
from fm_assets.engine.pool import (
    SpreadCost,
    UnitFailedError,
    UnitTask,
    WorkerLostError,
    can_start_processes,
    dump_job,
    metered_spread,
    preload_in_workers,
    resolve_workers,
    run_in_process,
    run_on_processes,
)
from fm_assets.engine.progress import unit_progress
from fm_assets.engine.records import Counts, StageSuccess, UnitMarker
from fm_assets.engine.refs import read_success, read_success_at
from fm_assets.engine.schemas import DOC_SCHEMA
from fm_assets.engine.stage import (
    Stage,
    StageContext,
    StageInput,
    UnitContext,
    UnitResult,
    WorkUnit,
    with_inputs,
)
from fm_assets.engine.store import ObjectStore
from fm_assets.engine.unit_writer import UnitWriter
from fm_assets.settings import PipelineSettings

log = logging.getLogger(__name__)

__all__ = [
    "NonDeterministicStageError", "StageContractError", "StageOutcome", "StageRun", "StageUnits", "UnitFailedError",
    "WorkerLostError", "resolve_upstream", "run_stage", "stage_run_for", "units_read",
]  # fmt: skip


class StageContractError(RuntimeError):
    """The stage broke its contract (accounting mismatch or non-deterministic output)."""


class NonDeterministicStageError(StageContractError):
    """A recomputed unit hashed differently from its committed output: the code is not pure."""


ProcessUnit = Callable[[WorkUnit, UnitWriter, str], UnitResult]  # (unit, writer, output prefix) -> result
OnComplete = Callable[[list[UnitMarker]], dict[str, Any]]
UnitExecutor = Literal["local", "spark"]
CacheHitCheck = Literal["metadata", "full"]


@dataclass
class StageOutcome:
    prefix: str
    key: str
    data_version: str
    cache_hit: bool
    success: StageSuccess
    units_computed: int
    units_skipped: int


class StageRun:
    """Executes one stage for one partition under the stage contract."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        stage: str,
        batch: str,
        code_version: str,
        config: dict[str, Any],
        input_versions: dict[str, str],
        output_schema: pa.Schema = DOC_SCHEMA,
        rows_per_file: int | None = None,
        bytes_per_file: int | None = None,
        verify_committed: bool = False,
        progress: bool = True,
        workers: int = 1,
        unit_executor: UnitExecutor = "local",
        spark: Callable[[], Any] | None = None,
        verify_cache_hits: CacheHitCheck = "metadata",
        upstream_files: Mapping[str, str] | None = None,
        upstream_label: tuple[str, str] = ("", ""),
        output_name: str = "",
    ) -> None:
        """``workers``: local processes for the units (1: in this process, 0: every core); with
        ``unit_executor="spark"`` units are Spark tasks of the session ``spark()`` returns instead.
        ``verify_cache_hits``: how a cache hit re-checks the output it reuses (``engine.integrity``).
        ``upstream_files``: sha256 of the upstream files units read (path under the root), rehashed by each
        unit before it reads them; ``upstream_label``: that output's (stage, batch), for the message.
        ``output_name``: a named auxiliary output of the stage (``stages/<stage>/<batch>/<name>-<key>/``: work a
        stage spreads over units before its own, e.g. near_dedup's signatures) instead of its output."""
        self.store = store
        self.stage = stage
        self.batch = batch
        self.code_version = code_version
        self.config = config
        self.input_versions = dict(sorted(input_versions.items()))
        self.output_schema = output_schema
        self.rows_per_file = rows_per_file
        self.bytes_per_file = bytes_per_file
        self.verify_committed = verify_committed
        self.progress = progress
        self.workers = workers
        self.unit_executor = unit_executor
        self.spark = spark
        self.verify_cache_hits = verify_cache_hits
        self.upstream_files = dict(upstream_files or {})
        self.upstream_bytes: dict[str, int] = {}  # size of each upstream file units read (largest_first)
        self.upstream_rows: dict[str, int] = {}  # rows of each upstream part units read (largest_first)
        self.units_wall = 0.0  # wall seconds this run spent running units (the rest is the driver's)
        self.units_where = "in-process"  # where they ran: in-process, N worker processes, spark
        # what the stage's own driver code (plan, prepare, complete) spread over the workers with
        # pool.map_on_workers (near_dedup's exact scoring): parallel work, though inside the driver's wall
        self.driver_spread = SpreadCost()
        self.upstream_label = upstream_label
        self.output_name = output_name
        self.key = stable_hash(
            {"code_version": code_version, "config": config, "inputs": self.input_versions}
        )
        self.prefix = layout.stage_output(
            stage, batch, f"{output_name}-{self.key}" if output_name else self.key
        )

    def __getstate__(self) -> dict[str, Any]:
        # what a worker needs to commit units; the Spark session handle stays with the driver
        return {**self.__dict__, "spark": None}

    @property
    def label(self) -> str:
        return f"{self.stage}{'.' + self.output_name if self.output_name else ''}[{self.batch}]"

    def rel(self, name: str) -> str:
        return layout.in_output(self.prefix, name)

    def cached(self) -> StageSuccess | None:
        rel = layout.success_marker(self.prefix)
        return StageSuccess.from_json(self.store.read_json(rel)) if self.store.exists(rel) else None

    def execute(
        self, units: Iterable[WorkUnit], process: ProcessUnit, on_complete: OnComplete | None = None
    ) -> StageOutcome:
        """Run every uncommitted unit, then ``on_complete`` (extra artifacts), then write ``_SUCCESS.json``."""
        started = time.perf_counter()
        cached = self.cached()
        if cached is not None:
            require_intact(
                self.store, cached, full=self.verify_cache_hits == "full", reader=f"{self.label} cache hit"
            )
            log.info("%s: cache hit (key %s), no work done", self.label, self.key)
            return StageOutcome(self.prefix, self.key, cached.data_version, True, cached, 0, 0)

        units = list(units)
        unit_ids = [u.unit_id for u in units]
        if len(set(unit_ids)) != len(unit_ids):
            raise StageContractError(f"{self.stage}: duplicate unit ids {unit_ids}")
        markers: dict[int, UnitMarker] = {}
        tasks: list[UnitTask] = []
        for index, unit in enumerate(units):
            marker_rel = layout.unit_marker(self.prefix, unit.unit_id)
            if self.store.exists(marker_rel):  # committed by an earlier attempt: skipped (or verified)
                markers[index] = UnitMarker.from_json(self.store.read_json(marker_rel))
                if self.verify_committed:
                    tasks.append(UnitTask(index, unit, commit=False))
            else:
                tasks.append(UnitTask(index, unit))
        skipped = len(markers)
        computed = 0

        def on_done(task: UnitTask, marker: UnitMarker) -> None:
            nonlocal computed
            if task.commit:
                markers[task.index] = marker
                computed += 1
            else:
                self._assert_same(task.unit.unit_id, markers[task.index], marker)

        bar = unit_progress(len(units), f"{self.stage}[{self.batch[:24]}]", bars=self.progress)

        def advance(finished: int) -> None:
            bar.update(finished)

        try:
            bar.update(len(units) - len(tasks))
            units_started = time.perf_counter()
            self._run_units(tasks, process, on_done, advance)
            self.units_wall = time.perf_counter() - units_started
        finally:
            bar.close()
        ordered = [markers[index] for index in range(len(units))]
        artifacts = on_complete(ordered) if on_complete else {}
        success = self._finalize(units, ordered, time.perf_counter() - started, computed, skipped, artifacts)
        return StageOutcome(self.prefix, self.key, success.data_version, False, success, computed, skipped)

    def _driver_spread_cost(self) -> dict[str, float | int]:
        spread = self.driver_spread
        if not spread.tasks:
            return {}
        return {
            "driver_spread_tasks": spread.tasks,
            "driver_spread_task_seconds": round(spread.task_seconds, 4),
            "driver_spread_wall_seconds": round(spread.wall_seconds, 4),
        }

    def _run_units(
        self,
        tasks: list[UnitTask],
        process: ProcessUnit,
        on_done: Callable[[UnitTask, UnitMarker], None],
        advance: Callable[[int], None],
    ) -> None:
        """Run ``tasks`` where the settings say; ``on_done`` gets each marker (completion order)."""
        if not tasks:
            return
        job = UnitJob(self, process)
        if self.unit_executor == "spark":
            from fm_assets.engine.spark_units import run_on_spark  # the Spark path only where configured

            if self.spark is None:
                raise StageContractError(
                    f"{self.label}: FM_UNIT_EXECUTOR=spark, but this run has no 'spark' resource to run units on"
                )
            self.units_where = "spark"
            payload = dump_job(job)
            if isinstance(payload, str):
                raise StageContractError(
                    f"{self.label}: units cannot run as Spark tasks, the unit job does not pickle: {payload}"
                )
            started = time.perf_counter()
            run_on_spark(
                self.spark(),
                self.label,
                payload,
                tasks,
                self._visible(on_done),
                advance,
                (StageContractError, DamagedDataError),
            )
            log.info(
                "%s: %d units as Spark tasks in %.2fs", self.label, len(tasks), time.perf_counter() - started
            )
            return
        workers = min(resolve_workers(self.workers), len(tasks))
        self.units_where = f"{workers} worker processes" if workers > 1 else "in-process"
        if workers <= 1:
            run_in_process(job, tasks, on_done, advance)
            return
        payload = can_start_processes() or dump_job(job)
        if isinstance(payload, str):
            log.warning(
                "%s: units run in this process, the unit job cannot go to worker processes: %s",
                self.label,
                payload,
            )
            self.units_where = "in-process"
            run_in_process(job, tasks, on_done, advance)
            return
        started = time.perf_counter()
        with self.store.staging_dir() as scratch:  # a killed run's job file stays inside the root
            run_on_processes(
                self.label,
                payload,
                largest_first(tasks, self.upstream_bytes, self.upstream_rows),
                workers,
                on_done,
                advance,
                (StageContractError, DamagedDataError),
                scratch=scratch,
            )
        log.info(
            "%s: %d units on %d worker processes in %.2fs (unit job %.1f MB)",
            self.label,
            len(tasks),
            workers,
            time.perf_counter() - started,
            len(payload) / 1e6,
        )

    def _visible(
        self, on_done: Callable[[UnitTask, UnitMarker], None]
    ) -> Callable[[UnitTask, UnitMarker], None]:
        """``on_done`` after checking that a unit committed elsewhere (a Spark executor) is in this store."""

        def checked(task: UnitTask, marker: UnitMarker) -> None:
            if task.commit and not self.store.exists(layout.unit_marker(self.prefix, task.unit.unit_id)):
                raise StageContractError(
                    f"{self.label} unit {task.unit.unit_id}: committed by a Spark executor but its marker is not in "
                    f"the store at {self.store.root}; the executors must reach the same store (S3, or a local "
                    "root on the executors' own machine, as with a loopback cluster)"
                )
            on_done(task, marker)

        return checked

    def _compute_unit(self, unit: WorkUnit, process: ProcessUnit, *, commit: bool) -> UnitMarker:
        unit_started = time.perf_counter()
        cpu_started = time.process_time()
        if self.upstream_files:  # every byte this unit builds on is what its writer recorded
            verify_inputs(
                self.store,
                self.upstream_files,
                unit.inputs,
                stage=self.upstream_label[0],
                batch=self.upstream_label[1],
                reader=f"{self.label} input",
            )
        with self.store.staging_dir() as staging:
            writer = UnitWriter(
                staging, unit.unit_id, self.output_schema, self.rows_per_file, self.bytes_per_file
            )
            result = process(unit, writer, self.prefix)
            if not result.empty_part and writer.records_out:
                raise StageContractError(
                    f"{self.stage}[{self.batch}] unit {unit.unit_id}: wrote {writer.records_out} rows but "
                    "said it writes none (UnitResult.empty_part=False)"
                )
            files = writer.close(empty_part=result.empty_part)
            checks_started = time.perf_counter()
            checks = result.check_written(list(writer.part_files)) if result.check_written else {}
            check_seconds = time.perf_counter() - checks_started
            hashes = {path.name: sha256_file(path) for path in files}
            records_out = writer.records_out if result.records_out is None else result.records_out
            if result.records_in != records_out + writer.records_rejected:
                raise StageContractError(
                    f"{self.stage}[{self.batch}] unit {unit.unit_id}: records_in={result.records_in} != "
                    f"records_out={records_out} + records_rejected={writer.records_rejected}"
                )
            marker = UnitMarker(
                unit=unit.unit_id,
                inputs=list(unit.inputs),
                files=hashes,
                parts=[path.name for path in writer.part_files],
                records_in=result.records_in,
                records_out=records_out,
                rows_written=writer.records_out,
                records_rejected=writer.records_rejected,
                rejects_by_reason=dict(sorted(writer.rejects_by_reason.items())),
                extra=result.extra,
                bytes_out=sum(path.stat().st_size for path in writer.part_files),
                seconds=round(time.perf_counter() - unit_started, 4),
                cpu_seconds=round(time.process_time() - cpu_started, 4),
                bytes_read=self._bytes_read(unit),
                part_rows=list(writer.part_rows),
                checks=checks,
                check_seconds=round(check_seconds, 4) if checks else 0.0,
            )
            if commit:
                for path in files:
                    self._check_leftover(unit.unit_id, path.name, hashes[path.name])
                    self.store.put_file(path, self.rel(path.name))
                # the unit's commit point
                self.store.write_json(layout.unit_marker(self.prefix, unit.unit_id), marker.to_json())
        return marker

    def _bytes_read(self, unit: WorkUnit) -> int:
        """Bytes of the unit's input files (cost metering); an input that is not a stored file counts 0."""
        total = 0
        for rel in unit.inputs:
            try:
                total += self.store.size(rel)
            except OSError:  # a unit input that names something other than a file (tests, synthetic units)
                continue
        return total

    def _check_leftover(self, unit_id: str, name: str, digest: str) -> None:
        """A file left by an attempt that died before its unit's marker is complete (writes are atomic), so
        it must equal what this attempt computed; otherwise the stage is not a pure function."""
        rel = self.rel(name)
        if not self.store.exists(rel):
            return
        with self.store.local_copy(rel) as existing:
            previous = sha256_file(existing)
        if previous != digest:
            raise NonDeterministicStageError(
                f"{self.stage}[{self.batch}] unit {unit_id}: {name} from an interrupted attempt has sha256 "
                f"{previous[:12]}, this attempt computed {digest[:12]}. The stage code is not a pure function of "
                f"its input, code version {self.code_version!r} and config; fix it or bump its code_version."
            )

    def _assert_same(self, unit_id: str, committed: UnitMarker, fresh: UnitMarker) -> None:
        if committed.files != fresh.files:
            raise NonDeterministicStageError(
                f"{self.stage}[{self.batch}] unit {unit_id}: recomputed output differs from the committed one "
                f"(committed {committed.files}, now {fresh.files}). The stage code is not a pure function of "
                f"its input, code version {self.code_version!r} and config; fix it or bump its code_version."
            )

    def _finalize(
        self,
        units: list[WorkUnit],
        ordered: list[UnitMarker],
        seconds: float,
        computed: int,
        skipped: int,
        artifacts: dict[str, Any],
    ) -> StageSuccess:
        totals = Counts()
        reasons: Counter[str] = Counter()
        extra_totals: dict[str, int | float] = {}
        for marker in ordered:
            totals = totals + marker.counts
            reasons.update(marker.rejects_by_reason)
            for name, value in marker.extra.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    extra_totals[name] = extra_totals.get(name, 0) + value
        if not totals.balanced:
            raise StageContractError(f"{self.stage}[{self.batch}]: accounting mismatch {totals}")
        files = describe_output(self.store, self.prefix, ordered)
        checked = sorted({name for marker in ordered for name in marker.checks})
        success = StageSuccess(
            stage=self.stage,
            batch=self.batch,
            key=self.key,
            prefix=self.prefix,
            code_version=self.code_version,
            config=self.config,
            inputs=self.input_versions,
            data_version=stable_hash([(m.unit, m.files) for m in ordered], length=32),
            units=[u.unit_id for u in units],
            parts=[self.rel(name) for m in ordered for name in m.parts],
            rejects=[self.rel(layout.rejects_name(m.unit)) for m in ordered],
            counts=totals,
            rejects_by_reason=dict(sorted(reasons.items())),
            extra=dict(sorted(extra_totals.items())),
            artifacts=artifacts,
            units_computed=computed,
            units_skipped=skipped,
            seconds=round(seconds, 4),
            files=files,
            cost={
                "cpu_seconds": round(sum(m.cpu_seconds for m in ordered), 4),
                "bytes_read": sum(m.bytes_read for m in ordered),
                "bytes_written": sum(
                    files[name]["bytes"] for m in ordered for name in m.files if name in files
                ),
                "bytes_stored": sum(entry["bytes"] for entry in files.values()),
                # the scale split (bench/scale.py): wall in units vs the driver's own, and where units ran
                "units_wall_seconds": round(self.units_wall, 4),
                "unit_seconds": round(sum(m.seconds for m in ordered), 4),
                "unit_check_seconds": round(sum(m.check_seconds for m in ordered), 4),
                "units_where": self.units_where,
                **self._driver_spread_cost(),
            },
            unit_checks={name: [m.checks.get(name) for m in ordered] for name in checked},
        )
        self.store.write_json(layout.success_marker(self.prefix), success.to_json())
        log.info(
            "%s[%s]: %d in, %d out, %d rejected (%d units computed, %d resumed)",
            self.stage,
            self.batch,
            totals.records_in,
            totals.records_out,
            totals.records_rejected,
            computed,
            skipped,
        )
        return success


@dataclass(frozen=True)
class UnitJob:
    """One unit's whole work (read, write, commit) for ``engine.pool``: picklable when ``process`` is."""

    run: StageRun
    process: ProcessUnit

    @property
    def label(self) -> str:
        return self.run.label

    def compute(self, unit: WorkUnit, *, commit: bool) -> UnitMarker:
        return self.run._compute_unit(unit, self.process, commit=commit)


class UnavailableResources(Mapping[str, Any]):
    """A worker's ``StageContext.resources``: the names are known, the engine handles stay with the parent."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = tuple(names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __getitem__(self, name: str) -> Any:
        raise RuntimeError(
            f"resource {name!r} is not available inside a unit running in a worker process or Spark task; "
            "use it in the stage's prepare() (its result reaches every unit) or side_inputs()"
        )

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def runtime_patches(cls: type) -> list[str]:
    """Methods of ``cls`` (and its bases) that are not the code of the class they sit on: replaced at run
    time. A worker re-imports the class from its module and would run the original, so such a stage runs
    its units in this process."""
    found = []
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, value in vars(klass).items():
            function = getattr(value, "__func__", value)  # staticmethod / classmethod
            if inspect.isfunction(function) and (
                function.__module__ != klass.__module__
                or not function.__qualname__.startswith(f"{klass.__qualname__}.")
            ):
                found.append(f"{klass.__qualname__}.{name}")
    return found


def plain_settings(settings: PipelineSettings) -> PipelineSettings:
    """The settings as a plain ``PipelineSettings`` (a Dagster config resource does not need to travel)."""
    if type(settings) is PipelineSettings:
        return settings
    return PipelineSettings.model_validate(settings.model_dump(include=set(PipelineSettings.model_fields)))


class StageUnits:
    """A stage's unit function: ``stage.process`` with the partition context and what ``prepare`` returned.

    Pickled (to a worker process or a Spark task) it carries the context without its resources and with
    plain settings; the stage itself goes by reference (its module is imported in the worker).
    """

    def __init__(self, stage: Stage, ctx: StageContext, prepared: Any) -> None:
        self.stage = stage
        self.ctx = ctx
        self.prepared = prepared

    def __call__(self, unit: WorkUnit, writer: UnitWriter, prefix: str) -> UnitResult:
        context = UnitContext(self.stage, self.ctx, unit, writer, prefix, self.prepared)
        result = self.stage.process(context)
        if not any(check.in_unit is not None for check in self.stage.checks):
            return result
        return replace(
            result, check_written=lambda written: run_in_unit_checks(self.stage, context, result, written)
        )

    def __reduce__(self) -> tuple[Any, ...]:
        patched = runtime_patches(type(self.stage))
        if patched:
            raise pickle.PicklingError(
                f"stage {self.stage.name} has methods replaced at run time ({', '.join(patched)}); "
                "a worker would import the original code"
            )
        worker_ctx = replace(
            self.ctx,
            resources=UnavailableResources(self.ctx.resources),
            settings=plain_settings(self.ctx.settings),
        )
        return (StageUnits, (self.stage, worker_ctx, self.prepared))


def resolve_upstream(store: ObjectStore, stage: Stage, batch: str) -> StageInput | None:
    if stage.upstream is None:
        return None
    success = read_success(store, stage.upstream, batch)
    return StageInput(
        stage.upstream, success.prefix, success.data_version, tuple(success.parts), success.artifacts
    )


def run_stage(stage: Stage, ctx: StageContext) -> StageOutcome:
    """Execute ``stage`` for ``ctx.batch`` under the stage contract and return the StageOutcome."""
    preload_in_workers(stage.worker_modules)
    upstream = ctx.upstream if ctx.upstream is not None else resolve_upstream(ctx.store, stage, ctx.batch)
    ctx = with_inputs(ctx, upstream, ctx.side)
    side = stage.side_inputs(ctx)
    ctx = with_inputs(ctx, upstream, side)
    inputs = dict(side.versions)
    if upstream is not None:
        inputs[upstream.stage] = upstream.data_version
    run = stage_run_for(
        ctx,
        stage=stage.name,
        code_version=stage.code_version,
        config=stage.config(ctx),
        input_versions=inputs,
        output_schema=stage.output_schema,
        rows_per_file=stage.rows_per_file(ctx),
        bytes_per_file=stage.bytes_per_file(ctx),
    )
    if run.cached() is not None:
        return run.execute([], lambda *_: UnitResult())
    upstream_success = None
    if upstream is not None:  # every byte this stage builds on is what its writer recorded
        upstream_success = read_success_at(ctx.store, upstream.prefix)
        require_intact(ctx.store, upstream_success, full=False, reader=f"{run.label} input")
    units = stage.plan(ctx)
    if upstream_success is not None:
        verify_upstream(run, ctx.store, upstream_success, units)
    with beside_units(run.label) as beside:
        with metered_spread(run.driver_spread):
            prepared = stage.prepare(ctx, units, run.prefix)
        beside.start()  # what prepare handed over runs on a driver thread while the units run

        def complete(markers: list[UnitMarker]) -> dict[str, Any]:
            beside.wait()
            with metered_spread(run.driver_spread):
                return stage.complete(ctx, prepared, run.prefix, markers)

        return run.execute(units, StageUnits(stage, ctx, prepared), on_complete=complete)


def stage_run_for(
    ctx: StageContext,
    *,
    stage: str,
    code_version: str,
    config: dict[str, Any],
    input_versions: dict[str, str],
    output_schema: pa.Schema,
    rows_per_file: int | None = None,
    bytes_per_file: int | None = None,
    output_name: str = "",
) -> StageRun:
    """A ``StageRun`` of one output of ``ctx.batch`` under the run's settings (workers, executor, checks)."""
    return StageRun(
        ctx.store,
        stage=stage,
        batch=ctx.batch,
        code_version=code_version,
        config=config,
        input_versions=input_versions,
        output_schema=output_schema,
        rows_per_file=rows_per_file,
        bytes_per_file=bytes_per_file,
        verify_committed=ctx.settings.verify_committed_units,
        progress=ctx.settings.progress,
        workers=ctx.settings.workers,
        unit_executor=ctx.settings.unit_executor,
        spark=spark_session_provider(ctx),
        verify_cache_hits=ctx.settings.verify_cache_hits,
        output_name=output_name,
    )


# what one row of an upstream part weighs in a unit's expected cost, in bytes of that part: per-document work
# (language ID, quality rules) makes a part of 5,000 short documents as slow as one of far more Parquet bytes.
# Fitted on the held-out batches' filter units (0.109 s per MB of text, 0.147 ms per document, ~3.4 bytes of
# text per Parquet byte): replaying the 101 MB batch's units on 16 workers, filter's waves 1.33 -> 1.15 s.
ROW_WEIGHT_BYTES = 400


def largest_first(
    tasks: list[UnitTask], sizes: Mapping[str, int], rows: Mapping[str, int] | None = None
) -> list[UnitTask]:
    """``tasks`` by the expected cost of what their units read, largest first: the input files' bytes plus
    ``ROW_WEIGHT_BYTES`` a row where their row counts are known (ties in unit order; unknown sizes count 0).

    A pool that starts the biggest units first ends a stage with the small ones, so fewer workers sit idle
    while the last unit runs (longest-processing-time-first scheduling). Markers are put back in unit order,
    so the output does not depend on this order."""
    rows = rows or {}

    def cost(task: UnitTask) -> int:
        return sum(sizes.get(rel, 0) + ROW_WEIGHT_BYTES * rows.get(rel, 0) for rel in task.unit.inputs)

    return sorted(tasks, key=lambda task: (-cost(task), task.index))


def verify_upstream(run: StageRun, store: ObjectStore, success: StageSuccess, units: list[WorkUnit]) -> None:
    """Before ``units`` read the upstream output ``success`` (whose presence and sizes were checked): rehash
    here only the files no unit reads (rejects, artifacts); the files units read go into ``run`` with their
    recorded sha256 and each unit rehashes its own inputs where it runs, spread over the workers."""
    read_by_units = units_read(run, store, success, units)
    elsewhere = [
        name
        for name in expected_files(store, success)
        if layout.in_output(success.prefix, name) not in read_by_units
    ]
    damage = check_output(store, success, full=True, names=elsewhere)
    if damage:
        raise DamagedDataError(damage_message(damage, f"{run.label} input"))


def units_read(run: StageRun, store: ObjectStore, success: StageSuccess, units: list[WorkUnit]) -> set[str]:
    """Give ``run`` the recorded sha256 of the upstream files ``units`` read (each unit rehashes its own where
    it runs) and return those paths."""
    files = {
        layout.in_output(success.prefix, name): entry
        for name, entry in expected_files(store, success).items()
    }
    read = {rel for unit in units for rel in unit.inputs if rel in files}
    run.upstream_files = {rel: files[rel]["sha256"] for rel in sorted(read)}
    run.upstream_bytes = {rel: int(files[rel].get("bytes", 0)) for rel in read}
    run.upstream_rows = {rel: int(files[rel].get("rows", 0)) for rel in read}
    run.upstream_label = (success.stage, success.batch)
    return read


def spark_session_provider(ctx: StageContext) -> Callable[[], Any] | None:
    """The session units run on with ``FM_UNIT_EXECUTOR=spark``: the 'spark' resource's, started on demand."""
    if ctx.settings.unit_executor != "spark" or "spark" not in ctx.resources:
        return None
    resource = ctx.resources["spark"]
    return resource.session if hasattr(resource, "session") else lambda: resource
