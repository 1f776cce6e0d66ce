"""The persistent cross-batch band index: its layout, reading schemas and the deterministic writer.

Layout (``out_index_path`` is a folder): ``bands/part-NNNNN.parquet`` with columns
``band`` (int), ``band_hash`` (long), ``doc_id`` (string), and ``signatures/part-NNNNN.parquet`` with
``doc_id``, ``quality_score`` (float), ``signature`` (binary, ``num_perm`` little-endian uint32).
It holds one batch's kept, non-empty documents only. Rows go to part ``xxhash64(key) mod index_partitions``
(band_hash for bands, doc_id for signatures) and are sorted inside each file, so the
same inputs give byte-identical parquet files; the folder appears atomically (temp folder + rename).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

PRIOR_BANDS_SCHEMA = T.StructType(
    [
        T.StructField("band", T.IntegerType()),
        T.StructField("band_hash", T.LongType()),
        T.StructField("doc_id", T.StringType()),
    ]
)
PRIOR_SIGS_SCHEMA = T.StructType(
    [
        T.StructField("doc_id", T.StringType()),
        T.StructField("quality_score", T.FloatType()),
        T.StructField("signature", T.BinaryType()),
    ]
)

_PART = "_part"

_ARROW_TYPES = {
    T.StringType: pa.string(),
    T.LongType: pa.int64(),
    T.IntegerType: pa.int32(),
    T.FloatType: pa.float32(),
    T.BinaryType: pa.binary(),
}


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, _ARROW_TYPES[type(f.dataType)]) for f in schema.fields])


def _write_part(folder: Path, part: int, table: pa.Table) -> None:
    """One whole part as ``part-<part>.parquet``: pyarrow is byte-deterministic for the same rows."""
    target = folder / f"part-{part:05d}.parquet"
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    pq.write_table(table, str(temp), compression="zstd")
    os.replace(temp, target)


def _part_writer(
    folder: str, schema: pa.Schema
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow body: rows arrive sorted by ``_part``; write each part's rows as one file.

    Spark's own parquet writer orders page encodings by JVM hash codes, which differ between JVMs.
    A Spark partition may hold several parts (hash collisions) or none; which one does not matter.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[pa.RecordBatch] = []
        current: int | None = None
        written: list[tuple[int, int]] = []

        def flush() -> None:
            if current is not None:
                table = pa.Table.from_batches(pending, schema=schema).combine_chunks()
                _write_part(Path(folder), current, table)
                written.append((current, table.num_rows))

        for batch in batches:
            parts = np.asarray(batch.column(_PART))
            rows = batch.drop_columns([_PART]).cast(schema)
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


def _write_deterministic(df: DataFrame, path: Path, partitions: int, key: str, order: list[str]) -> int:
    """``partitions`` files ``part-NNNNN.parquet``: rows hashed on ``key`` to a part, sorted by ``order``.

    The part is a column, not Spark's partition number, so adaptive execution (which may coalesce or
    skip a shuffle) cannot change which row lands in which file. Parts without rows get empty files.
    """
    path.mkdir(parents=True, exist_ok=True)
    schema = _arrow_schema(df.schema)
    with_part = df.withColumn(_PART, F.pmod(F.xxhash64(key), F.lit(partitions)).cast("int"))
    written = (
        with_part.repartition(partitions, _PART)
        .sortWithinPartitions(_PART, *order)
        .mapInArrow(_part_writer(str(path), schema), "part int, rows long")
        .collect()
    )
    for part in sorted(set(range(partitions)) - {row["part"] for row in written}):
        _write_part(path, part, schema.empty_table())
    return sum(int(row["rows"]) for row in written)


def write_index(kept: DataFrame, out: Path, config: NearDedupConfig) -> int:
    scratch = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex}"
    scratch.mkdir(parents=True)
    band_rows = kept.select(F.posexplode("bands").alias("band", "band_hash"), "doc_id").select(
        F.col("band").cast("int"), "band_hash", "doc_id"
    )
    _write_deterministic(
        band_rows, scratch / "bands", config.index_partitions, "band_hash", ["band", "band_hash", "doc_id"]
    )
    signatures = kept.select("doc_id", "quality_score", "signature")
    documents = _write_deterministic(
        signatures, scratch / "signatures", config.index_partitions, "doc_id", ["doc_id"]
    )
    (scratch / "_SUCCESS.json").write_text(
        json.dumps({"config": config.fingerprint(), "documents": documents}, sort_keys=True)
    )
    if out.exists():
        shutil.rmtree(out)
    os.replace(scratch, out)
    return documents
