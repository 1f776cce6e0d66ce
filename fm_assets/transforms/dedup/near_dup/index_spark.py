"""The band index written from a Spark DataFrame: the same parts, rows and files as ``index.write_index_arrow``.

Rows go to part ``pmod(xxhash64(key), index_partitions)`` and each part is written as one file by
:func:`.index.write_part` from the executors (Spark's own parquet writer orders page encodings by JVM hash
codes, which differ between JVMs), with the schemas of :mod:`.index`; the layout is described there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.index import (
    BANDS_ARROW_SCHEMA,
    BANDS_ORDER,
    PART_COLUMN,
    SIGS_ARROW_SCHEMA,
    SIGS_ORDER,
    publish,
    write_part,
)


def _part_writer(
    folder: str, schema: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow body: rows arrive sorted by ``PART_COLUMN``; write each part's rows as one file.

    A Spark partition may hold several parts (hash collisions) or none; which one does not matter.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[pa.RecordBatch] = []
        current: int | None = None
        written: list[tuple[int, int]] = []

        def flush() -> None:
            if current is not None:
                table = pa.Table.from_batches(pending, schema=schema).combine_chunks()
                write_part(Path(folder), current, table)
                written.append((current, table.num_rows))

        for batch in batches:
            parts = np.asarray(batch.column(PART_COLUMN))
            rows = batch.drop_columns([PART_COLUMN]).cast(schema)
            bounds = np.flatnonzero(np.diff(parts)) + 1
            for begin, end in zip([0, *bounds], [*bounds, len(parts)], strict=True):
                if end == begin:
                    continue
                if parts[begin] != current:
                    flush()
                    pending, current = [], int(parts[begin])
                pending.append(rows.slice(begin, end - begin))
        flush()
        yield pa.RecordBatch.from_pydict(
            {"part": [p for p, _ in written], "rows": [r for _, r in written]},
            schema=pa.schema([("part", pa.int32()), ("rows", pa.int64())]),
        )

    return write


def _write_deterministic(
    df: DataFrame, path: Path, schema: pa.Schema, partitions: int, key: str, order: list[str]
) -> int:
    """``partitions`` files ``part-NNNNN.parquet`` in ``schema``: rows hashed on ``key`` to a part, sorted by
    ``order``.

    The part is a column, not Spark's partition number, so adaptive execution (which may coalesce or
    skip a shuffle) cannot change which row lands in which file. Parts without rows get empty files.
    """
    path.mkdir(parents=True, exist_ok=True)
    with_part = df.withColumn(PART_COLUMN, F.pmod(F.xxhash64(key), F.lit(partitions)).cast("int"))
    written = (
        with_part.repartition(partitions, PART_COLUMN)
        .sortWithinPartitions(PART_COLUMN, *order)
        .mapInArrow(_part_writer(str(path), schema), "part int, rows long")
        .collect()
    )
    for part in sorted(set(range(partitions)) - {row["part"] for row in written}):
        write_part(path, part, schema.empty_table())
    return sum(int(row["rows"]) for row in written)


def write_index(kept: DataFrame, out: Path, config: NearDedupConfig) -> int:
    """The index of ``kept`` (doc_id, quality_score, signature, bands) from Spark."""
    partitions = config.index_partitions

    def fill(scratch: Path) -> int:
        band_rows = kept.select(F.posexplode("bands").alias("band", "band_hash"), "doc_id").select(
            F.col("band").cast("int"), "band_hash", "doc_id"
        )
        _write_deterministic(
            band_rows, scratch / "bands", BANDS_ARROW_SCHEMA, partitions, "band_hash", BANDS_ORDER
        )
        signatures = kept.select(*SIGS_ARROW_SCHEMA.names)
        return _write_deterministic(
            signatures, scratch / "signatures", SIGS_ARROW_SCHEMA, partitions, "doc_id", SIGS_ORDER
        )

    return publish(out, config, fill)
