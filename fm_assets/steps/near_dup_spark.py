"""Near-duplicate removal with MinHash LSH on Spark, deduplicating each batch against every earlier one.

Pipeline (all distributed; only the removed-documents table comes back to the driver):

1. signatures per Arrow batch (``mapInArrow`` + :mod:`minhash`), band hashes per document;
2. band buckets over this batch's bands plus the matching entries of the prior band index;
   pairs inside a bucket (all pairs up to ``max_bucket_pairs`` members, a star to the bucket's smallest
   id above that), never a pair of two prior documents;
3. verification: exact n-gram Jaccard when both documents are in this batch and ``verify_exact``,
   otherwise the MinHash estimate (prior documents keep only their signature); edges need
   ``similarity >= threshold``;
4. connected components (large-star/small-star, :mod:`connected_components`);
5. survivor per component, **the documented rule**: a document already in the prior index wins (it was
   published earlier), then the highest ``quality_score`` (null ranks lowest), then the smallest
   ``doc_id``. ``cluster_id`` is the smallest ``doc_id`` in the component.
6. every other document of this batch in the component is removed when its similarity to the survivor
   (same verification rule) is at least ``min_survivor_similarity`` (default ``threshold - 0.1``): this
   guards against chains A~B~C pulling in a C that is far from A. Such chain members are kept.

Index layout (``out_index_path`` is a folder): ``bands/part-NNNNN.parquet`` with columns
``band`` (int), ``band_hash`` (long), ``doc_id`` (string), and ``signatures/part-NNNNN.parquet`` with
``doc_id``, ``quality_score`` (float), ``signature`` (binary, ``num_perm`` little-endian uint32).
It holds this batch's kept, non-empty documents only. Files are hash-partitioned and sorted, so the
same inputs give byte-identical parquet files; the folder appears atomically (temp folder + rename).
Documents without any token (empty, only punctuation) have no signature: they are kept and counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fm_assets.steps.connected_components import connected_components
from fm_assets.steps.lsh_params import optimal_lsh_params
from fm_assets.steps.minhash import (
    MinHasher,
    band_hashes,
    estimate_jaccard,
    exact_jaccard_pairs,
    signatures_from_shingles,
)

logger = logging.getLogger(__name__)

CODE_VERSION = "near_dup_spark/1"
REASON = "near_duplicate"
_MAX_SLICE_BYTES = 64 << 20  # text bytes hashed at once inside one Arrow batch

REMOVED_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string()),
        pa.field("cluster_id", pa.string()),
        pa.field("survivor_id", pa.string()),
        pa.field("similarity", pa.float64()),
        pa.field("survivor_is_prior", pa.bool_()),
        pa.field("reason", pa.string()),
    ]
)


@dataclass(frozen=True)
class NearDedupConfig:
    ngram: int = 5
    threshold: float = 0.8
    num_perm: int = 128
    seed: int = 1
    verify_exact: bool = True
    fp_weight: float = 0.1
    fn_weight: float = 0.9
    bands: int | None = None  # both None: chosen by lsh_params for threshold/num_perm/weights
    rows: int | None = None
    max_bucket_pairs: int = 50
    min_survivor_similarity: float | None = None  # None: threshold - 0.1
    index_partitions: int = 4

    def lsh(self) -> tuple[int, int]:
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        params = optimal_lsh_params(self.threshold, self.num_perm, self.fp_weight, self.fn_weight)
        return params.bands, params.rows

    def survivor_floor(self) -> float:
        if self.min_survivor_similarity is not None:
            return self.min_survivor_similarity
        return self.threshold - 0.1

    def hasher(self) -> MinHasher:
        return MinHasher(num_perm=self.num_perm, ngram=self.ngram, seed=self.seed)

    def fingerprint(self) -> str:
        """Stable key of everything that changes the output (config + this module's code version)."""
        payload = json.dumps({"code": CODE_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


@dataclass
class NearDedupOutcome:
    removed: pa.Table  # REMOVED_SCHEMA, sorted by doc_id
    index_rows: int  # documents written to the band index
    stats: dict = field(default_factory=dict)


_SIG_SCHEMA = T.StructType(
    [
        T.StructField("doc_id", T.StringType()),
        T.StructField("quality_score", T.FloatType()),
        T.StructField("n_shingles", T.LongType()),
        T.StructField("signature", T.BinaryType()),
        T.StructField("bands", T.ArrayType(T.LongType())),
    ]
)

_SIM_SCHEMA = T.StructType(
    [
        T.StructField("a", T.StringType()),
        T.StructField("b", T.StringType()),
        T.StructField("similarity", T.DoubleType()),
        T.StructField("exact", T.BooleanType()),
    ]
)


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


def _signature_batches(config: NearDedupConfig, bands: int, rows: int):
    hasher = config.hasher()

    def compute(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for part in _slices(batch):
                shingles = hasher.shingles(part.column("text"))
                sigs = signatures_from_shingles(shingles, config.num_perm, config.seed)
                n = part.num_rows
                sig_offsets = pa.array(np.arange(n + 1, dtype=np.int32) * (config.num_perm * 4))
                sig_array = pa.BinaryArray.from_buffers(
                    pa.binary(), n, [None, sig_offsets.buffers()[1], pa.py_buffer(sigs.astype("<u4").tobytes())]
                )
                band_offsets = pa.array(np.arange(n + 1, dtype=np.int32) * bands)
                band_array = pa.ListArray.from_arrays(band_offsets, pa.array(band_hashes(sigs, bands, rows).ravel()))
                yield pa.RecordBatch.from_arrays(
                    [
                        part.column("doc_id"),
                        part.column("quality_score").cast(pa.float32()),
                        pa.array(shingles.counts(), type=pa.int64()),
                        sig_array,
                        band_array,
                    ],
                    names=[f.name for f in _SIG_SCHEMA.fields],
                )

    return compute


def _similarity_batches(config: NearDedupConfig):
    """(a, b, sig_a, sig_b, text_a, text_b) -> (a, b, similarity, exact)."""

    def compute(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            width = config.num_perm * 4
            sig_a = np.frombuffer(b"".join(batch.column("sig_a").to_pylist()), dtype="<u4").reshape(n, -1)
            sig_b = np.frombuffer(b"".join(batch.column("sig_b").to_pylist()), dtype="<u4").reshape(n, -1)
            assert sig_a.shape[1] * 4 == width
            similarity = np.asarray(estimate_jaccard(sig_a, sig_b), dtype=np.float64)
            exact = np.zeros(n, dtype=bool)
            if config.verify_exact:
                has_text = np.asarray(
                    pc.and_(batch.column("text_a").is_valid(), batch.column("text_b").is_valid())
                )
                idx = np.flatnonzero(has_text)
                if len(idx):
                    take = pa.array(idx)
                    similarity[idx] = exact_jaccard_pairs(
                        batch.column("text_a").take(take),
                        batch.column("text_b").take(take),
                        config.ngram,
                        config.seed,
                    )
                    exact[idx] = True
            yield pa.RecordBatch.from_arrays(
                [batch.column("a"), batch.column("b"), pa.array(similarity), pa.array(exact)],
                names=["a", "b", "similarity", "exact"],
            )

    return compute


def _similarities(
    pairs: DataFrame, all_sigs: DataFrame, texts: DataFrame, config: NearDedupConfig
) -> DataFrame:
    """Attach signatures (and texts of this batch when verifying exactly) and score each pair."""
    sig = all_sigs.select("doc_id", "signature")
    joined = pairs.join(sig.withColumnRenamed("doc_id", "a").withColumnRenamed("signature", "sig_a"), "a").join(
        sig.withColumnRenamed("doc_id", "b").withColumnRenamed("signature", "sig_b"), "b"
    )
    if config.verify_exact:
        txt = texts.select("doc_id", "text")
        joined = joined.join(
            txt.withColumnRenamed("doc_id", "a").withColumnRenamed("text", "text_a"), "a", "left"
        ).join(txt.withColumnRenamed("doc_id", "b").withColumnRenamed("text", "text_b"), "b", "left")
    else:
        joined = joined.withColumn("text_a", F.lit(None).cast("string")).withColumn(
            "text_b", F.lit(None).cast("string")
        )
    columns = ["a", "b", "sig_a", "sig_b", "text_a", "text_b"]
    return joined.select(*columns).mapInArrow(_similarity_batches(config), _SIM_SCHEMA)


def _read_docs(spark: SparkSession, docs_parquet: list[str]) -> DataFrame:
    docs = spark.read.parquet(*docs_parquet)
    quality = F.col("quality_score") if "quality_score" in docs.columns else F.lit(None)
    return docs.select(
        F.col("doc_id").cast("string"), F.col("text").cast("string"), quality.cast("float").alias("quality_score")
    )


def _candidate_pairs(batch_bands: DataFrame, prior_bands: DataFrame, max_bucket_pairs: int) -> DataFrame:
    """Distinct (a, b) with a < b sharing a band bucket; never two prior documents.

    One group-by builds each bucket's sorted member list; pairs are generated in the same projection
    (all pairs up to ``max_bucket_pairs`` members, else a star on the smallest id).
    """
    members = "sort_array(collect_list(struct(doc_id, prior)))"
    all_pairs = (
        "flatten(transform(sequence(0, size(m) - 2), i -> "
        "transform(sequence(i + 1, size(m) - 1), j -> struct(m[i] as x, m[j] as y))))"
    )
    star = "transform(slice(m, 2, size(m) - 1), y -> struct(m[0] as x, y as y))"
    pairs_expr = f"CASE WHEN size(m) <= {int(max_bucket_pairs)} THEN {all_pairs} ELSE {star} END"
    return (
        batch_bands.unionByName(prior_bands)
        .groupBy("band", "band_hash")
        .agg(F.expr(members).alias("m"))
        .where(F.expr("size(m) > 1 AND exists(m, e -> NOT e.prior)"))
        .select(F.explode(F.expr(pairs_expr)).alias("p"))
        .where(~(F.col("p.x.prior") & F.col("p.y.prior")))
        .select(F.col("p.x.doc_id").alias("a"), F.col("p.y.doc_id").alias("b"))
        .distinct()
    )


def _partition_writer(folder: str, schema: pa.Schema):
    """mapInArrow body: write the whole partition as ``part-<partition>.parquet`` with pyarrow.

    pyarrow's writer is byte-deterministic (Spark's parquet writer orders page encodings by JVM
    hash codes, which differ between JVMs), so the same rows give the same file on any executor.
    """

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        number = context.partitionId() if context is not None else 0
        target = Path(folder) / f"part-{number:05d}.parquet"
        temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
        rows = 0
        with pq.ParquetWriter(str(temp), schema, compression="zstd") as writer:
            for batch in batches:
                rows += batch.num_rows
                writer.write_batch(batch.cast(schema) if batch.schema != schema else batch)
        os.replace(temp, target)
        yield pa.RecordBatch.from_pydict({"rows": [rows]}, schema=pa.schema([("rows", pa.int64())]))

    return write


def _write_deterministic(df: DataFrame, path: Path, partitions: int, key: str, order: list[str]) -> int:
    """Hash-partition on ``key``, sort inside partitions, one pyarrow file per partition."""
    path.mkdir(parents=True, exist_ok=True)
    schema = _arrow_schema(df.schema)
    written = (
        df.repartition(partitions, key)
        .sortWithinPartitions(*order)
        .mapInArrow(_partition_writer(str(path), schema), "rows long")
        .agg(F.sum("rows"))
        .collect()
    )
    return int(written[0][0] or 0)


_ARROW_TYPES = {
    T.StringType: pa.string(),
    T.LongType: pa.int64(),
    T.IntegerType: pa.int32(),
    T.FloatType: pa.float32(),
    T.BinaryType: pa.binary(),
}


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, _ARROW_TYPES[type(f.dataType)]) for f in schema.fields])


def _empty_frame(spark: SparkSession, schema: T.StructType) -> DataFrame:
    """An empty frame built in the JVM (createDataFrame([]) would start a Python worker)."""
    return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])


_PRIOR_BANDS_SCHEMA = T.StructType(
    [T.StructField("band", T.IntegerType()), T.StructField("band_hash", T.LongType()), T.StructField("doc_id", T.StringType())]
)
_PRIOR_SIGS_SCHEMA = T.StructType(
    [
        T.StructField("doc_id", T.StringType()),
        T.StructField("quality_score", T.FloatType()),
        T.StructField("signature", T.BinaryType()),
    ]
)


def run_near_dedup(
    spark: SparkSession,
    docs_parquet: list[str],
    prior_index_paths: list[str],
    out_index_path: str,
    config: NearDedupConfig,
) -> NearDedupOutcome:
    """Remove near-duplicates of this batch (against itself and the prior index); write its index."""
    started = time.perf_counter()
    bands, rows = config.lsh()
    docs = _read_docs(spark, docs_parquet)

    phases: dict[str, float] = {}
    mark = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        phases[name] = round(now - mark[0], 3)
        mark[0] = now

    sigs = docs.mapInArrow(_signature_batches(config, bands, rows), _SIG_SCHEMA).localCheckpoint(eager=True)
    n_docs = sigs.count()
    lap("signatures")
    hashed = sigs.where(F.col("n_shingles") > 0)
    batch_ids = hashed.select("doc_id")

    if prior_index_paths:
        prior_bands = spark.read.schema(_PRIOR_BANDS_SCHEMA).parquet(*[f"{p}/bands" for p in prior_index_paths])
        prior_sigs = spark.read.schema(_PRIOR_SIGS_SCHEMA).parquet(*[f"{p}/signatures" for p in prior_index_paths])
        # a batch that is (wrongly) in its own prior list must not dedup against itself
        prior_bands = prior_bands.join(batch_ids, "doc_id", "left_anti")
        prior_sigs = prior_sigs.join(batch_ids, "doc_id", "left_anti")
    else:
        prior_bands = _empty_frame(spark, _PRIOR_BANDS_SCHEMA)
        prior_sigs = _empty_frame(spark, _PRIOR_SIGS_SCHEMA)

    batch_bands = hashed.select("doc_id", F.posexplode("bands").alias("band", "band_hash")).select(
        F.col("band").cast("int"), "band_hash", "doc_id", F.lit(False).alias("prior")
    )
    prior_bands = prior_bands.join(batch_bands.select("band", "band_hash").distinct(), ["band", "band_hash"]).select(
        "band", "band_hash", "doc_id", F.lit(True).alias("prior")
    )
    pairs = _candidate_pairs(batch_bands, prior_bands, config.max_bucket_pairs).localCheckpoint(eager=True)
    n_candidates = pairs.count()
    lap("candidates")

    all_sigs = hashed.select("doc_id", "quality_score", "signature", F.lit(False).alias("prior")).unionByName(
        prior_sigs.select("doc_id", "quality_score", "signature", F.lit(True).alias("prior"))
    )
    scored = _similarities(pairs, all_sigs, docs, config)
    edges = scored.where(F.col("similarity") >= config.threshold).localCheckpoint(eager=True)
    n_edges = edges.count()
    lap("verify")

    components = connected_components(edges, src="a", dst="b")
    lap("components")
    members = components.assignments.join(
        all_sigs.select(F.col("doc_id").alias("node"), "quality_score", "prior"), "node"
    )
    ranking = Window.partitionBy("component").orderBy(
        F.col("prior").desc(), F.col("quality_score").desc_nulls_last(), F.col("node").asc()
    )
    ranked = members.withColumn("rank", F.row_number().over(ranking))
    survivors = ranked.where(F.col("rank") == 1).select(
        "component", F.col("node").alias("survivor_id"), F.col("prior").alias("survivor_is_prior")
    )
    losers = ranked.where((F.col("rank") > 1) & ~F.col("prior")).join(survivors, "component")
    to_survivor = _similarities(
        losers.select(F.col("node").alias("a"), F.col("survivor_id").alias("b")), all_sigs, docs, config
    )
    judged = (
        losers.select(
            F.col("node").alias("doc_id"), F.col("component").alias("cluster_id"), "survivor_id", "survivor_is_prior"
        )
        .join(to_survivor.select(F.col("a").alias("doc_id"), "similarity"), "doc_id")
        .localCheckpoint(eager=True)
    )
    removed_df = judged.where(F.col("similarity") >= config.survivor_floor())
    chain_kept = judged.count() - removed_df.count()
    removed = removed_df.select(
        "doc_id", "cluster_id", "survivor_id", "similarity", "survivor_is_prior", F.lit(REASON).alias("reason")
    ).orderBy("doc_id").toArrow()
    removed = removed.cast(REMOVED_SCHEMA) if removed.num_rows else REMOVED_SCHEMA.empty_table()
    n_clusters = survivors.count()
    lap("survivors")

    kept = hashed.join(removed_df.select("doc_id"), "doc_id", "left_anti")
    index_rows = _write_index(kept, Path(out_index_path), config)
    lap("index")

    stats = {
        "docs": n_docs,
        "empty_docs": n_docs - hashed.count(),
        "bands": bands,
        "rows": rows,
        "candidate_pairs": n_candidates,
        "verified_edges": n_edges,
        "clusters": n_clusters,
        "removed": removed.num_rows,
        "removed_against_prior": int(pc.sum(removed.column("survivor_is_prior")).as_py() or 0),
        "chain_kept": chain_kept,
        "cc_iterations": components.iterations,
        "prior_indexes": len(prior_index_paths),
        "seconds": round(time.perf_counter() - started, 3),
        "phase_seconds": phases,
        "config": config.fingerprint(),
    }
    logger.info("near-dup dedup: %s", stats)
    return NearDedupOutcome(removed=removed, index_rows=index_rows, stats=stats)


def _write_index(kept: DataFrame, out: Path, config: NearDedupConfig) -> int:
    scratch = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex}"
    scratch.mkdir(parents=True)
    band_rows = kept.select(F.posexplode("bands").alias("band", "band_hash"), "doc_id").select(
        F.col("band").cast("int"), "band_hash", "doc_id"
    )
    _write_deterministic(band_rows, scratch / "bands", config.index_partitions, "band_hash", ["band", "band_hash", "doc_id"])
    signatures = kept.select("doc_id", "quality_score", "signature")
    documents = _write_deterministic(signatures, scratch / "signatures", config.index_partitions, "doc_id", ["doc_id"])
    (scratch / "_SUCCESS.json").write_text(json.dumps({"config": config.fingerprint(), "documents": documents}, sort_keys=True))
    if out.exists():
        shutil.rmtree(out)
    os.replace(scratch, out)
    return documents
