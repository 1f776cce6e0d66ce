"""The stage executor: content-addressed, resumable, accounted execution of one stage for one partition.

A stage's output lives at ``stages/<stage>/<batch>/<key>/`` where ``key`` hashes (code version, config,
input data versions). Work is cut into deterministic units; each unit writes ``part-<unit>*.parquet`` and
``rejects-<unit>.parquet`` and then its marker ``_units/<unit>.json`` (the unit's commit).
``_SUCCESS.json`` is written last and makes the whole output a cache hit for every later
materialization with the same key. No Dagster import here: the Dagster layer wraps ``run_stage``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from tqdm.auto import tqdm

from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_file, stable_hash
from fm_assets.engine.records import Counts, StageSuccess, UnitMarker
from fm_assets.engine.refs import read_success
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

log = logging.getLogger(__name__)


class StageContractError(RuntimeError):
    """The stage broke its contract (accounting mismatch or non-deterministic output)."""


class NonDeterministicStageError(StageContractError):
    """A recomputed unit hashed differently from its committed output: the code is not pure."""


ProcessUnit = Callable[[WorkUnit, UnitWriter, str], UnitResult]  # (unit, writer, output prefix) -> result
OnComplete = Callable[[list[UnitMarker]], dict[str, Any]]


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
        verify_committed: bool = False,
        progress: bool = True,
    ) -> None:
        self.store = store
        self.stage = stage
        self.batch = batch
        self.code_version = code_version
        self.config = config
        self.input_versions = dict(sorted(input_versions.items()))
        self.output_schema = output_schema
        self.rows_per_file = rows_per_file
        self.verify_committed = verify_committed
        self.progress = progress
        self.key = stable_hash({"code_version": code_version, "config": config, "inputs": self.input_versions})
        self.prefix = layout.stage_output(stage, batch, self.key)

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
            log.info("%s[%s]: cache hit (key %s), no work done", self.stage, self.batch, self.key)
            return StageOutcome(self.prefix, self.key, cached.data_version, True, cached, 0, 0)

        units = list(units)
        unit_ids = [u.unit_id for u in units]
        if len(set(unit_ids)) != len(unit_ids):
            raise StageContractError(f"{self.stage}: duplicate unit ids {unit_ids}")
        markers: dict[str, UnitMarker] = {}
        computed = skipped = 0
        bar = tqdm(units, desc=f"{self.stage}[{self.batch[:24]}]", unit="unit", disable=not self.progress, leave=False)
        for unit in bar:
            marker_rel = layout.unit_marker(self.prefix, unit.unit_id)
            if self.store.exists(marker_rel):
                marker = UnitMarker.from_json(self.store.read_json(marker_rel))
                if self.verify_committed:
                    self._assert_same(unit.unit_id, marker, self._compute_unit(unit, process, commit=False))
                markers[unit.unit_id] = marker
                skipped += 1
                continue
            markers[unit.unit_id] = self._compute_unit(unit, process, commit=True)
            computed += 1
        bar.close()
        ordered = [markers[u.unit_id] for u in units]
        artifacts = on_complete(ordered) if on_complete else {}
        success = self._finalize(units, ordered, time.perf_counter() - started, computed, skipped, artifacts)
        return StageOutcome(self.prefix, self.key, success.data_version, False, success, computed, skipped)

    def _compute_unit(self, unit: WorkUnit, process: ProcessUnit, *, commit: bool) -> UnitMarker:
        unit_started = time.perf_counter()
        with self.store.staging_dir() as staging:
            writer = UnitWriter(staging, unit.unit_id, self.output_schema, self.rows_per_file)
            result = process(unit, writer, self.prefix)
            files = writer.close()
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
            )
            if commit:
                for path in files:
                    self._check_leftover(unit.unit_id, path.name, hashes[path.name])
                    self.store.put_file(path, self.rel(path.name))
                # the unit's commit point
                self.store.write_json(layout.unit_marker(self.prefix, unit.unit_id), marker.to_json())
        return marker

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
        extra_totals: Counter[str] = Counter()
        for marker in ordered:
            totals = totals + marker.counts
            reasons.update(marker.rejects_by_reason)
            for name, value in marker.extra.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    extra_totals[name] += value
        if not totals.balanced:
            raise StageContractError(f"{self.stage}[{self.batch}]: accounting mismatch {totals}")
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
        )
        self.store.write_json(layout.success_marker(self.prefix), success.to_json())
        log.info(
            "%s[%s]: %d in, %d out, %d rejected (%d units computed, %d resumed)",
            self.stage, self.batch, totals.records_in, totals.records_out, totals.records_rejected, computed, skipped,
        )
        return success


def resolve_upstream(store: ObjectStore, stage: Stage, batch: str) -> StageInput | None:
    if stage.upstream is None:
        return None
    success = read_success(store, stage.upstream, batch)
    return StageInput(stage.upstream, success.prefix, success.data_version, tuple(success.parts), success.artifacts)


def run_stage(stage: Stage, ctx: StageContext) -> StageOutcome:
    """Execute ``stage`` for ``ctx.batch`` under the stage contract and return the StageOutcome."""
    upstream = ctx.upstream if ctx.upstream is not None else resolve_upstream(ctx.store, stage, ctx.batch)
    ctx = with_inputs(ctx, upstream, ctx.side)
    side = stage.side_inputs(ctx)
    ctx = with_inputs(ctx, upstream, side)
    inputs = dict(side.versions)
    if upstream is not None:
        inputs[upstream.stage] = upstream.data_version
    run = StageRun(
        ctx.store,
        stage=stage.name,
        batch=ctx.batch,
        code_version=stage.code_version,
        config=stage.config(ctx),
        input_versions=inputs,
        output_schema=stage.output_schema,
        rows_per_file=stage.rows_per_file(ctx),
        verify_committed=ctx.settings.verify_committed_units,
        progress=ctx.settings.progress,
    )
    if run.cached() is not None:
        return run.execute([], lambda *_: UnitResult())
    units = stage.plan(ctx)
    prepared = stage.prepare(ctx, units, run.prefix)

    def process(unit: WorkUnit, writer: UnitWriter, prefix: str) -> UnitResult:
        return stage.process(UnitContext(stage, ctx, unit, writer, prefix, prepared))

    return run.execute(
        units, process, on_complete=lambda markers: stage.complete(ctx, prepared, run.prefix, markers)
    )
