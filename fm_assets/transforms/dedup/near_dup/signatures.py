"""MinHash signatures and LSH band hashes of each document, computed per Arrow batch on Spark.

Reads the input documents (``doc_id``, ``text``, ``quality_score``) and maps every Arrow batch through
:mod:`minhash`: one row per document with its shingle count, its signature (``num_perm``
little-endian uint32) and its band hashes. Documents without any token get ``n_shingles == 0``.
"""

from __future__ import annotations

import pyarrow.dataset as ds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fm_assets.transforms.dedup.near_dup.signature_arrow import SIG_COLUMNS, signature_batches

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


__all__ = ["SIG_COLUMNS", "SIG_SCHEMA", "count_rows", "read_docs", "signature_batches"]
