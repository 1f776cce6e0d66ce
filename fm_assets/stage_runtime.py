"""The stage contract engine: content-addressed, resumable, accounted stage execution.

A stage's output for one partition lives at ``stages/<stage>/<batch>/<key>/`` where ``key`` hashes
(code version, config, input data versions). Work is cut into deterministic units; each unit writes
``part-<unit>*.parquet`` and ``rejects-<unit>.parquet`` and then its marker ``_units/<unit>.json``
(the unit's commit). ``_SUCCESS.json`` is written last and makes the whole output a cache hit for
every later materialization with the same key. No Dagster import here: the asset layer wraps it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from fm_assets.steps.records import DOC_SCHEMA, REJECT_SCHEMA
from fm_resources.object_store import ObjectStore, sha256_file

log = logging.getLogger(__name__)

PARQUET_ROWS_PER_GROUP = 4096


class StageContractError(RuntimeError):
    """The stage broke its contract (accounting mismatch or non-deterministic output)."""


class NonDeterministicStageError(StageContractError):
    """A recomputed unit hashed differently from its committed output: the code is not pure."""


def stable_hash(obj: Any, length: int = 16) -> str:
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:length]


@dataclass(frozen=True)
class StageInput:
    """The upstream output a stage reads: its folder, data version and committed part files."""

    stage: str
    prefix: str
    data_version: str
    parts: tuple[str, ...]  # relative paths of part files, in unit order
    artifacts: dict[str, Any] = field(default_factory=dict)  # what the upstream stage's complete() described


@dataclass(frozen=True)
class WorkUnit:
    unit_id: str
    inputs: tuple[str, ...]  # relative paths this unit reads (upstream parts or landed files)


@dataclass
class UnitResult:
    """What a unit reports besides the rows it wrote."""

    records_in: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # bytes, tokens, pii counts, ...
    records_out: int | None = None  # when output rows are not records (pack: documents in, rows out)


class UnitWriter:
    """Streams one unit's output rows and rejects into local Parquet files (bounded memory)."""

    def __init__(self, staging: Path, unit_id: str, schema: pa.Schema, rows_per_file: int | None = None) -> None:
        self.staging = staging
        self.unit_id = unit_id
        self.schema = schema
        self.rows_per_file = rows_per_file
        self.part_files: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_file = 0
        self._pending: list[dict[str, Any]] = []
        self._rejects: list[dict[str, Any]] = []
        self._reject_writer: pq.ParquetWriter | None = None
        self.records_out = 0
        self.records_rejected = 0
        self.rejects_by_reason: Counter[str] = Counter()
        self.rejects_file = staging / f"rejects-{unit_id}.parquet"

    def _open_part(self) -> None:
        index = len(self.part_files)
        name = f"part-{self.unit_id}.parquet" if self.rows_per_file is None else f"part-{self.unit_id}-{index:04d}.parquet"
        path = self.staging / name
        self.part_files.append(path)
        self._writer = pq.ParquetWriter(path, self.schema, compression="zstd")
        self._rows_in_file = 0

    def _flush_rows(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._open_part()
        assert self._writer is not None
        self._writer.write_table(pa.Table.from_pylist(self._pending, schema=self.schema), PARQUET_ROWS_PER_GROUP)
        self._rows_in_file += len(self._pending)
        self._pending = []
        if self.rows_per_file is not None and self._rows_in_file >= self.rows_per_file:
            self._writer.close()
            self._writer = None

    def write(self, row: dict[str, Any]) -> None:
        self._pending.append(row)
        self.records_out += 1
        if len(self._pending) >= PARQUET_ROWS_PER_GROUP or (
            self.rows_per_file is not None and self._rows_in_file + len(self._pending) >= self.rows_per_file
        ):
            self._flush_rows()

    def write_table(self, table: pa.Table) -> None:
        self._flush_rows()
        if self._writer is None:
            self._open_part()
        assert self._writer is not None
        self._writer.write_table(table.cast(self.schema), PARQUET_ROWS_PER_GROUP)
        self.records_out += table.num_rows

    def reject(self, row: dict[str, Any]) -> None:
        self._rejects.append(row)
        self.records_rejected += 1
        self.rejects_by_reason[row["reason"]] += 1
        if len(self._rejects) >= 1024:
            self._flush_rejects()

    def _flush_rejects(self) -> None:
        if self._reject_writer is None:
            self._reject_writer = pq.ParquetWriter(self.rejects_file, REJECT_SCHEMA, compression="zstd")
        if self._rejects:
            self._reject_writer.write_table(pa.Table.from_pylist(self._rejects, schema=REJECT_SCHEMA))
        self._rejects = []

    def close(self) -> list[Path]:
        self._flush_rows()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if not self.part_files:  # an empty unit still commits an (empty) part so downstream sees it
            self._open_part()
            assert self._writer is not None
            self._writer.close()
            self._writer = None
        self._flush_rejects()
        assert self._reject_writer is not None
        self._reject_writer.close()
        return [*self.part_files, self.rejects_file]


ProcessUnit = Callable[["StageRun", WorkUnit, UnitWriter], UnitResult]


@dataclass
class StageOutcome:
    prefix: str
    key: str
    data_version: str
    cache_hit: bool
    success: dict[str, Any]
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
        self.prefix = f"stages/{stage}/{batch}/{self.key}"

    # -- paths ------------------------------------------------------------------------------------
    def rel(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def marker_rel(self, unit_id: str) -> str:
        return self.rel(f"_units/{unit_id}.json")

    @property
    def success_rel(self) -> str:
        return self.rel("_SUCCESS.json")

    def cached(self) -> dict[str, Any] | None:
        return self.store.read_json(self.success_rel) if self.store.exists(self.success_rel) else None

    # -- execution --------------------------------------------------------------------------------
    def execute(
        self,
        units: Iterable[WorkUnit],
        process: ProcessUnit,
        on_complete: Callable[[StageRun, list[dict[str, Any]]], dict[str, Any]] | None = None,
    ) -> StageOutcome:
        """Run every uncommitted unit, then ``on_complete`` (extra artifacts), then write ``_SUCCESS.json``."""
        started = time.perf_counter()
        cached = self.cached()
        if cached is not None:
            log.info("%s[%s]: cache hit (key %s), no work done", self.stage, self.batch, self.key)
            return StageOutcome(self.prefix, self.key, cached["data_version"], True, cached, 0, 0)

        units = list(units)
        unit_ids = [u.unit_id for u in units]
        if len(set(unit_ids)) != len(unit_ids):
            raise StageContractError(f"{self.stage}: duplicate unit ids {unit_ids}")
        markers: dict[str, dict[str, Any]] = {}
        computed = skipped = 0
        bar = tqdm(units, desc=f"{self.stage}[{self.batch[:24]}]", unit="unit", disable=not self.progress, leave=False)
        for unit in bar:
            marker_rel = self.marker_rel(unit.unit_id)
            if self.store.exists(marker_rel):
                marker = self.store.read_json(marker_rel)
                if self.verify_committed:
                    fresh = self._compute_unit(unit, process, commit=False)
                    self._assert_same(unit.unit_id, marker, fresh)
                markers[unit.unit_id] = marker
                skipped += 1
                continue
            markers[unit.unit_id] = self._compute_unit(unit, process, commit=True)
            computed += 1
        bar.close()
        artifacts = on_complete(self, [markers[u.unit_id] for u in units]) if on_complete else {}
        success = self._finalize(units, markers, time.perf_counter() - started, computed, skipped, artifacts)
        return StageOutcome(self.prefix, self.key, success["data_version"], False, success, computed, skipped)

    def _compute_unit(self, unit: WorkUnit, process: ProcessUnit, *, commit: bool) -> dict[str, Any]:
        unit_started = time.perf_counter()
        with self.store.staging_dir() as staging:
            writer = UnitWriter(staging, unit.unit_id, self.output_schema, self.rows_per_file)
            result = process(self, unit, writer)
            files = writer.close()
            hashes = {path.name: sha256_file(path) for path in files}
            records_out = writer.records_out if result.records_out is None else result.records_out
            if result.records_in != records_out + writer.records_rejected:
                raise StageContractError(
                    f"{self.stage}[{self.batch}] unit {unit.unit_id}: records_in={result.records_in} != "
                    f"records_out={records_out} + records_rejected={writer.records_rejected}"
                )
            marker = {
                "unit": unit.unit_id,
                "inputs": list(unit.inputs),
                "files": hashes,
                "parts": [path.name for path in writer.part_files],
                "records_in": result.records_in,
                "records_out": records_out,
                "rows_written": writer.records_out,
                "records_rejected": writer.records_rejected,
                "rejects_by_reason": dict(sorted(writer.rejects_by_reason.items())),
                "extra": result.extra,
                "bytes_out": sum(path.stat().st_size for path in writer.part_files),
                "seconds": round(time.perf_counter() - unit_started, 4),
            }
            if commit:
                for path in files:
                    self._check_leftover(unit.unit_id, path.name, hashes[path.name])
                    self.store.put_file(path, self.rel(path.name))
                self.store.write_json(self.marker_rel(unit.unit_id), marker)  # the unit's commit point
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

    def _assert_same(self, unit_id: str, committed: dict[str, Any], fresh: dict[str, Any]) -> None:
        if committed["files"] != fresh["files"]:
            raise NonDeterministicStageError(
                f"{self.stage}[{self.batch}] unit {unit_id}: recomputed output differs from the committed one "
                f"(committed {committed['files']}, now {fresh['files']}). The stage code is not a pure function of "
                f"its input, code version {self.code_version!r} and config; fix it or bump its code_version."
            )

    def _finalize(
        self,
        units: list[WorkUnit],
        markers: dict[str, dict[str, Any]],
        seconds: float,
        computed: int,
        skipped: int,
        artifacts: dict[str, Any],
    ) -> dict[str, Any]:
        ordered = [markers[u.unit_id] for u in units]
        totals = Counter()
        reasons: Counter[str] = Counter()
        extra_totals: Counter[str] = Counter()
        for marker in ordered:
            for name in ("records_in", "records_out", "records_rejected", "rows_written", "bytes_out"):
                totals[name] += marker[name]
            reasons.update(marker["rejects_by_reason"])
            for name, value in marker["extra"].items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    extra_totals[name] += value
        if totals["records_in"] != totals["records_out"] + totals["records_rejected"]:
            raise StageContractError(f"{self.stage}[{self.batch}]: accounting mismatch {dict(totals)}")
        data_version = stable_hash([(m["unit"], m["files"]) for m in ordered], length=32)
        success = {
            "stage": self.stage,
            "batch": self.batch,
            "key": self.key,
            "prefix": self.prefix,
            "code_version": self.code_version,
            "config": self.config,
            "inputs": self.input_versions,
            "data_version": data_version,
            "units": [u.unit_id for u in units],
            "parts": [f"{self.prefix}/{name}" for m in ordered for name in m["parts"]],
            "rejects": [f"{self.prefix}/rejects-{m['unit']}.parquet" for m in ordered],
            "counts": dict(totals),
            "rejects_by_reason": dict(sorted(reasons.items())),
            "extra": dict(sorted(extra_totals.items())),
            "artifacts": artifacts,
            "units_computed": computed,
            "units_skipped": skipped,
            "seconds": round(seconds, 4),
        }
        self.store.write_json(self.success_rel, success)
        log.info(
            "%s[%s]: %d in, %d out, %d rejected (%d units computed, %d resumed)",
            self.stage, self.batch, totals["records_in"], totals["records_out"], totals["records_rejected"], computed, skipped,
        )
        return success

    # -- reading inputs ---------------------------------------------------------------------------
    def iter_batches(self, rel: str, columns: list[str] | None = None, batch_size: int = 2048) -> Iterator[pa.RecordBatch]:
        return iter_parquet_batches(self.store, rel, columns, batch_size)

    def iter_rows(self, rel: str, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
        for record_batch in self.iter_batches(rel, columns):
            yield from record_batch.to_pylist()


def iter_parquet_batches(
    store: ObjectStore, rel: str, columns: list[str] | None = None, batch_size: int = 2048
) -> Iterator[pa.RecordBatch]:
    """Stream a Parquet file from the store in bounded record batches."""
    with store.open(rel) as handle:
        yield from pq.ParquetFile(handle).iter_batches(batch_size=batch_size, columns=columns)


def units_from_parts(stage_input: StageInput) -> list[WorkUnit]:
    """One unit per upstream part file; the unit id is the part's own unit suffix."""
    units = []
    for part in stage_input.parts:
        name = part.rsplit("/", 1)[-1]
        unit_id = name.removeprefix("part-").removesuffix(".parquet")
        units.append(WorkUnit(unit_id, (part,)))
    return units
