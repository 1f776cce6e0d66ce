"""Typed run records: what a unit commits (``_units/<unit>.json``), what a stage output is (``_SUCCESS.json``)
and what a ref points at (``refs/<stage>/<batch>.json``). The JSON on disk is these classes' ``to_json``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

COUNT_FIELDS = ("records_in", "records_out", "records_rejected", "rows_written", "bytes_out")


@dataclass(frozen=True)
class Counts:
    records_in: int = 0
    records_out: int = 0
    records_rejected: int = 0
    rows_written: int = 0
    bytes_out: int = 0

    @property
    def balanced(self) -> bool:
        return self.records_in == self.records_out + self.records_rejected

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, name) + getattr(other, name) for name in COUNT_FIELDS))

    def to_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class UnitMarker:
    """One unit's commit: its inputs, the sha256 of every file it wrote and its accounting."""

    unit: str
    inputs: list[str]
    files: dict[str, str]  # file name -> sha256
    parts: list[str]  # part file names, in order
    records_in: int
    records_out: int
    rows_written: int
    records_rejected: int
    rejects_by_reason: dict[str, int]
    extra: dict[str, Any]
    bytes_out: int
    seconds: float
    # cost metering (markers written before it was recorded load as 0): CPU seconds of the unit's process
    # while it ran the unit, and bytes of the files it read
    cpu_seconds: float = 0.0
    bytes_read: int = 0
    # rows of each part file, in ``parts`` order (markers written before it was recorded load as []): what
    # the next stage's executor weighs its units by, with their bytes (run.largest_first)
    part_rows: list[int] = field(default_factory=list)
    # what the stage's checks found in this unit's written parts, run where the unit ran before it committed
    # (``StageCheck.in_unit``): check name -> its findings; and the seconds that took (within ``seconds``)
    checks: dict[str, Any] = field(default_factory=dict)
    check_seconds: float = 0.0

    @property
    def counts(self) -> Counts:
        return Counts(
            self.records_in, self.records_out, self.records_rejected, self.rows_written, self.bytes_out
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> UnitMarker:
        return cls(**obj)


@dataclass(frozen=True)
class StageSuccess:
    """A committed stage output for one partition (``_SUCCESS.json``)."""

    stage: str
    batch: str
    key: str
    prefix: str
    code_version: str
    config: dict[str, Any]
    inputs: dict[str, str]  # input name -> data version (upstream stage and side inputs)
    data_version: str
    units: list[str]
    parts: list[str]  # paths relative to the store root, in unit order
    rejects: list[str]
    counts: Counts
    rejects_by_reason: dict[str, int]
    extra: dict[str, Any]  # numeric unit metrics summed (tokens, bytes_in, pii counts, ...)
    artifacts: dict[str, Any]  # what the stage's complete() described (manifests, indexes, ...)
    units_computed: int
    units_skipped: int
    seconds: float
    # every file of the output folder but _SUCCESS.json: name -> {"sha256", "bytes"} (engine.integrity);
    # empty for outputs committed before it was recorded
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    # what producing this output cost: cpu_seconds, bytes_read, bytes_written (unit files), bytes_stored (every
    # file of the output folder); empty for outputs committed before it was recorded
    cost: dict[str, Any] = field(default_factory=dict)
    # per check run in the units (``StageCheck.in_unit``): each unit's findings in unit order (None: that
    # unit has none), what the check itself then judges
    unit_checks: dict[str, list[Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        obj = asdict(self)
        obj["counts"] = self.counts.to_json()
        return obj

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> StageSuccess:
        return cls(**{**obj, "counts": Counts(**obj["counts"])})


@dataclass(frozen=True)
class StageRef:
    """Which output folder is a stage's current one for a batch, and how its last materialization went."""

    prefix: str
    data_version: str
    last_cache_hit: bool = False
    last_wall_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> StageRef:
        return cls(**obj)


@dataclass(frozen=True)
class PriorOutput:
    """An earlier batch's committed output of the same stage (for cross-batch indexes)."""

    batch: str
    prefix: str
    data_version: str
    artifacts: dict[str, Any] = field(default_factory=dict)
