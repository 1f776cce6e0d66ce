"""MinHash signatures and LSH band hashes of each document on Spark: the input documents mapped per Arrow
batch through :func:`.signature_arrow.signature_batches` into its :data:`.signature_arrow.SIG_ARROW_SCHEMA`.

Reads the input documents (``doc_id``, ``text``, ``quality_score``) the way ``docs.read_docs_arrow`` reads
them in-process; documents without any token get ``n_shingles == 0``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.signature_arrow import SIG_ARROW_SCHEMA, signature_batches
from fm_assets.transforms.dedup.near_dup.spark_schema import spark_schema


def read_docs(spark: SparkSession, docs_parquet: list[str]) -> DataFrame:
    docs = spark.read.parquet(*docs_parquet)
    quality = F.col("quality_score") if "quality_score" in docs.columns else F.lit(None)
    return docs.select(
        F.col("doc_id").cast("string"),
        F.col("text").cast("string"),
        quality.cast("float").alias("quality_score"),
    )


def signature_rows(docs: DataFrame, config: NearDedupConfig, bands: int, rows: int) -> DataFrame:
    """One row per document of ``docs``, in ``SIG_ARROW_SCHEMA`` (text kept only when verifying exactly)."""
    return docs.mapInArrow(signature_batches(config, bands, rows), spark_schema(SIG_ARROW_SCHEMA))
