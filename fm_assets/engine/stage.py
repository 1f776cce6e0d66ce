"""The stage contract every preprocessing stage implements, and the context objects it is given.

A stage declares what its output depends on (``config``, ``side_inputs``: both only read, never train or
pin anything), cuts the partition into units (``plan``), may decide something partition-wide once
(``prepare``: returns the shared object every unit sees), processes one unit at a time (``process``) and
may write partition-level artifacts (``complete``). The executor (``engine.run``) owns keys, commits,
resume and accounting; the Dagster layer only wraps ``run_stage``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from fm_assets.engine import layout
from fm_assets.engine.records import UnitMarker
from fm_assets.engine.schemas import DOC_SCHEMA, reject_row
from fm_assets.engine.store import ObjectStore, iter_parquet_batches
from fm_assets.engine.unit_writer import UnitWriter
from fm_assets.settings import PipelineSettings


@dataclass(frozen=True)
class StageInput:
    """The upstream output a stage reads: its folder, data version and committed part files."""

    stage: str
    prefix: str
    data_version: str
    parts: tuple[str, ...]  # relative paths of part files, in unit order
    artifacts: Mapping[str, Any] = field(
        default_factory=dict
    )  # what the upstream stage's complete() described


@dataclass(frozen=True)
class SideInputs:
    """Inputs besides the upstream stage: their versions go into the stage key, ``data`` is what was read."""

    versions: Mapping[str, str] = field(default_factory=dict)
    data: Any = None


@dataclass(frozen=True)
class WorkUnit:
    unit_id: str
    inputs: tuple[str, ...]  # relative paths this unit reads (upstream parts or landed files)
    # the part of its one input the unit reads when not all of it (land: a line-aligned byte range); only
    # the stage that planned it interprets it (it must pickle); ``inputs`` stays the real path
    span: object | None = None


@dataclass
class UnitResult:
    """What a unit reports besides the rows it wrote."""

    records_in: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # bytes, tokens, pii counts, ...
    records_out: int | None = None  # when output rows are not records (pack: documents in, rows out)
    # False: the unit writes no rows by design (land's whole-file unit, which only copies a file into the
    # CAS), so it commits no empty part and later stages get no unit for it
    empty_part: bool = True
    # set by the executor (run.StageUnits): the stage's in-unit checks over the unit's written part files,
    # run once they are closed and before the unit commits; check name -> findings (UnitMarker.checks)
    check_written: Callable[[list[Path]], dict[str, Any]] | None = field(
        default=None, repr=False, compare=False
    )


@dataclass(frozen=True)
class StageContext:
    """Everything a stage knows about one partition; built by the Dagster layer (or a test)."""

    store: ObjectStore
    batch: str
    settings: PipelineSettings
    resources: Mapping[str, Any] = field(
        default_factory=dict
    )  # engines and side-input registries (spark, ...)
    upstream: StageInput | None = None
    side: SideInputs = SideInputs()
    pipeline_version: str = ""  # one id for the code of every stage (recorded in shard manifests)

    @property
    def upstream_input(self) -> StageInput:
        if self.upstream is None:
            raise RuntimeError(f"batch {self.batch}: this stage has no upstream stage")
        return self.upstream

    def resource(self, name: str) -> Any:
        if name not in self.resources:
            raise KeyError(f"stage needs the '{name}' resource, which this run did not provide")
        return self.resources[name]


@dataclass(frozen=True)
class UnitContext:
    """One unit's view: the partition context, the unit, where its rows go and what ``prepare`` decided."""

    stage: Stage
    partition: StageContext
    unit: WorkUnit
    writer: UnitWriter
    output_prefix: str
    prepared: Any = None

    @property
    def store(self) -> ObjectStore:
        return self.partition.store

    @property
    def batch(self) -> str:
        return self.partition.batch

    @property
    def settings(self) -> PipelineSettings:
        return self.partition.settings

    def output_rel(self, name: str) -> str:
        return layout.in_output(self.output_prefix, name)

    def iter_batches(
        self, rel: str, columns: list[str] | None = None, batch_size: int = 2048
    ) -> Iterator[pa.RecordBatch]:
        return iter_parquet_batches(self.store, rel, columns, batch_size)

    def iter_rows(self, rel: str, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
        for record_batch in self.iter_batches(rel, columns):
            yield from record_batch.to_pylist()

    def write(self, row: dict[str, Any]) -> None:
        self.writer.write(row)

    def reject(
        self, record: dict[str, Any] | None, reason: str, details: Mapping[str, Any] | None = None, **raw: Any
    ) -> None:
        """Keep a dropped record with its reason; ``raw`` overrides provenance for input that is not a record."""
        self.writer.reject(
            reject_row(
                record,
                batch=self.batch,
                stage=self.stage.name,
                reason=reason,
                details=dict(details or {}),
                **raw,
            )
        )


class Stage:
    """One preprocessing stage. Subclasses set the class attributes and implement ``process``."""

    name: ClassVar[str]
    code_version: ClassVar[str]
    upstream: ClassVar[str | None]
    description: ClassVar[str] = ""
    output_schema: ClassVar[pa.Schema] = DOC_SCHEMA
    checks: ClassVar[tuple[Any, ...]] = ()  # StageChecks besides accounting and schema
    side_input_assets: ClassVar[
        tuple[str, ...]
    ] = ()  # asset keys of the side inputs (tokenizer, blocklists, ...)
    kind: ClassVar[str] = "python"
    # heavy modules the units import and the driver does not: pool workers start with them (engine.pool)
    worker_modules: ClassVar[tuple[str, ...]] = ()

    def config(self, ctx: StageContext) -> dict[str, Any]:
        """The settings that change this stage's output (hashed into the stage key)."""
        return {}

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        """Versions of inputs besides the upstream stage (hashed into the key). Reads only: never trains or pins."""
        return SideInputs()

    def rows_per_file(self, ctx: StageContext) -> int | None:
        """Roll output into several part files of this many rows (None: one part per unit)."""
        return None

    def bytes_per_file(self, ctx: StageContext) -> int | None:
        """Also roll output past this many bytes per part (None: rows only), so a few large files still give
        downstream stages enough units to spread over workers. The bytes are those of each row's string values,
        provenance (batch, source) included: the same documents landed under another source name may cut
        elsewhere."""
        return None

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        """Cut the partition into deterministic units; default: one per upstream part."""
        return units_from_parts(ctx.upstream_input)

    def prepare(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> Any:
        """Partition-wide work before units run (e.g. which duplicates go); its result reaches every unit.

        Re-run on resume, so it must be a pure function of the inputs.
        """
        return None

    def process(self, unit: UnitContext) -> UnitResult:
        raise NotImplementedError

    def complete(
        self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        """Write partition-level artifacts after all units (before ``_SUCCESS.json``); returns their description."""
        return {}


def units_from_parts(stage_input: StageInput) -> list[WorkUnit]:
    """One unit per upstream part file; the unit id is the part's own unit suffix."""
    return [WorkUnit(layout.unit_of_part(part), (part,)) for part in stage_input.parts]


def with_inputs(ctx: StageContext, upstream: StageInput | None, side: SideInputs) -> StageContext:
    return replace(ctx, upstream=upstream, side=side)
