"""Streams one unit's output rows and rejects into local Parquet files (bounded memory), plus any other
files the unit writes (``add_file``), so every file a unit commits is hashed into its marker.

Parquet is written with page checksums (CRC32 per data page) so a reader detects a damaged page even
without the marker's sha256."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.schemas import REJECT_SCHEMA

PARQUET_ROWS_PER_GROUP = 4096
PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_page_checksum": True}


class UnitWriter:
    """Writes a unit's kept rows (rolled into several parts past ``rows_per_file`` rows or ``bytes_per_file``
    bytes of string/binary values, so downstream units follow bytes) and its rejects."""

    def __init__(
        self,
        staging: Path,
        unit_id: str,
        schema: pa.Schema,
        rows_per_file: int | None = None,
        bytes_per_file: int | None = None,
    ) -> None:
        self.staging = staging
        self.unit_id = unit_id
        self.schema = schema
        self.rows_per_file = rows_per_file
        self.bytes_per_file = bytes_per_file
        self._bytes_in_file = 0
        self._pending_bytes = 0
        self.part_files: list[Path] = []
        self.part_rows: list[int] = []  # rows written to each part file, in part_files order
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_file = 0
        self._pending: list[dict[str, Any]] = []
        self._rejects: list[dict[str, Any]] = []
        self._reject_writer: pq.ParquetWriter | None = None
        self.records_out = 0
        self.records_rejected = 0
        self.rejects_by_reason: Counter[str] = Counter()
        self.rejects_file = staging / layout.rejects_name(unit_id)
        self.extra_files: list[Path] = []

    def _open_part(self) -> None:
        index = len(self.part_files)
        rolls = self.rows_per_file is not None or self.bytes_per_file is not None
        name = layout.part_name(self.unit_id, index if rolls else None)
        path = self.staging / name
        self.part_files.append(path)
        self.part_rows.append(0)
        self._writer = pq.ParquetWriter(path, self.schema, **PARQUET_OPTIONS)
        self._rows_in_file = 0
        self._bytes_in_file = 0

    def _flush_rows(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._open_part()
        assert self._writer is not None
        self._writer.write_table(
            pa.Table.from_pylist(self._pending, schema=self.schema), PARQUET_ROWS_PER_GROUP
        )
        self._rows_in_file += len(self._pending)
        self.part_rows[-1] += len(self._pending)
        self._bytes_in_file += self._pending_bytes
        self._pending = []
        self._pending_bytes = 0
        if self._file_full(0, 0):
            self._writer.close()
            self._writer = None

    def _file_full(self, more_rows: int, more_bytes: int) -> bool:
        return (self.rows_per_file is not None and self._rows_in_file + more_rows >= self.rows_per_file) or (
            self.bytes_per_file is not None and self._bytes_in_file + more_bytes >= self.bytes_per_file
        )

    def write(self, row: dict[str, Any]) -> None:
        self._pending.append(row)
        self._pending_bytes += sum(len(v) for v in row.values() if isinstance(v, (str, bytes)))
        self.records_out += 1
        if len(self._pending) >= PARQUET_ROWS_PER_GROUP or self._file_full(
            len(self._pending), self._pending_bytes
        ):
            self._flush_rows()

    def write_table(self, table: pa.Table) -> None:
        self._flush_rows()
        if self._writer is None:
            self._open_part()
        assert self._writer is not None
        self._writer.write_table(table.cast(self.schema), PARQUET_ROWS_PER_GROUP)
        self.part_rows[-1] += table.num_rows
        self.records_out += table.num_rows

    def add_file(self, name: str, data: bytes) -> None:
        """Another file of this unit's output (e.g. a shard tar), committed and hashed with its parts."""
        if "/" in name or name.startswith(".") or name.startswith("_"):
            raise ValueError(f"unit {self.unit_id}: {name!r} is not a plain file name for the output folder")
        path = self.staging / name
        if path.exists():
            raise ValueError(f"unit {self.unit_id}: {name!r} was added twice")
        path.write_bytes(data)
        self.extra_files.append(path)

    def reject(self, row: dict[str, Any]) -> None:
        self._rejects.append(row)
        self.records_rejected += 1
        self.rejects_by_reason[row["reason"]] += 1
        if len(self._rejects) >= 1024:
            self._flush_rejects()

    def _flush_rejects(self) -> None:
        if self._reject_writer is None:
            self._reject_writer = pq.ParquetWriter(self.rejects_file, REJECT_SCHEMA, **PARQUET_OPTIONS)
        if self._rejects:
            self._reject_writer.write_table(pa.Table.from_pylist(self._rejects, schema=REJECT_SCHEMA))
        self._rejects = []

    def close(self, empty_part: bool = True) -> list[Path]:
        """Finish the unit's files; ``empty_part=False``: a unit that wrote no rows commits no part."""
        self._flush_rows()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        # an empty unit still commits an (empty) part so downstream sees it, unless it writes no rows by design
        if not self.part_files and empty_part:
            self._open_part()
            assert self._writer is not None
            self._writer.close()
            self._writer = None
        self._flush_rejects()
        assert self._reject_writer is not None
        self._reject_writer.close()
        return [*self.part_files, self.rejects_file, *self.extra_files]
