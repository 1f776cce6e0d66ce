"""MinHash signatures and LSH band hashes of each document, computed per Arrow batch on Spark.

Reads the input documents (``doc_id``, ``text``, ``quality_score``) and maps every Arrow batch through
:mod:`minhash`: one row per document with its shingle count, its signature (``num_perm``
little-endian uint32) and its band hashes. Documents without any token get ``n_shingles == 0``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fm_assets.transforms.dedup.minhash import band_hashes, signatures_from_shingles
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

_MAX_SLICE_BYTES = 64 << 20  # text bytes hashed at once inside one Arrow batch

SIG_SCHEMA = T.StructType(
    [
        T.StructField("doc_id", T.StringType()),
        T.StructField("quality_score", T.FloatType()),
        T.StructField("n_shingles", T.LongType()),
        T.StructField("signature", T.BinaryType()),
        T.StructField("bands", T.ArrayType(T.LongType())),
        T.StructField("text", T.StringType()),  # kept only when verifying exactly (null otherwise)
    ]
)


def read_docs(spark: SparkSession, docs_parquet: list[str]) -> DataFrame:
    docs = spark.read.parquet(*docs_parquet)
    quality = F.col("quality_score") if "quality_score" in docs.columns else F.lit(None)
    return docs.select(
        F.col("doc_id").cast("string"),
        F.col("text").cast("string"),
        quality.cast("float").alias("quality_score"),
    )


def count_rows(docs_parquet: list[str]) -> int:
    """Rows of the input files from their parquet footers (no Spark job)."""
    return ds.dataset(docs_parquet, format="parquet").count_rows()


def _slices(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """Cut a batch so one slice holds at most _MAX_SLICE_BYTES of text (an enormous doc stays alone)."""
    sizes = np.asarray(pc.binary_length(batch.column("text")).fill_null(0), dtype=np.int64)
    start, acc = 0, 0
    for i, size in enumerate(sizes):
        if acc and acc + size > _MAX_SLICE_BYTES:
            yield batch.slice(start, i - start)
            start, acc = i, 0
        acc += int(size)
    if start < batch.num_rows:
        yield batch.slice(start, batch.num_rows - start)


def signature_batches(
    config: NearDedupConfig, bands: int, rows: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    hasher = config.hasher()

    def compute(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for part in _slices(batch):
                shingles = hasher.shingles(part.column("text"))
                sigs = signatures_from_shingles(shingles, config.num_perm, config.seed)
                n = part.num_rows
                sig_offsets = pa.array(np.arange(n + 1, dtype=np.int32) * (config.num_perm * 4))
                sig_array = pa.BinaryArray.from_buffers(
                    pa.binary(),
                    n,
                    [None, sig_offsets.buffers()[1], pa.py_buffer(sigs.astype("<u4").tobytes())],
                )
                band_offsets = pa.array(np.arange(n + 1, dtype=np.int32) * bands)
                band_array = pa.ListArray.from_arrays(
                    band_offsets, pa.array(band_hashes(sigs, bands, rows).ravel())
                )
                yield pa.RecordBatch.from_arrays(
                    [
                        part.column("doc_id"),
                        part.column("quality_score").cast(pa.float32()),
                        pa.array(shingles.counts(), type=pa.int64()),
                        sig_array,
                        band_array,
                        part.column("text") if config.verify_exact else pa.nulls(n, pa.string()),
                    ],
                    names=[f.name for f in SIG_SCHEMA.fields],
                )

    return compute
