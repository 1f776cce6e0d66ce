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
It holds this batch's kept, non-empty documents only. Rows go to part ``xxhash64(key) mod index_partitions``
(band_hash for bands, doc_id for signatures) and are sorted inside each file, so the
same inputs give byte-identical parquet files; the folder appears atomically (temp folder + rename).
Documents without any token (empty, only punctuation) have no signature: they are kept and counted.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fm_assets.transforms.dedup.connected_components import connected_components
from fm_assets.transforms.dedup.minhash import (
    band_hashes,
    estimate_jaccard,
    exact_jaccard_pairs,
    signatures_from_shingles,
)
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

logger = logging.getLogger(__name__)

REASON = "near_duplicate"
_MAX_SLICE_BYTES = 64 << 20  # text bytes hashed at once inside one Arrow batch
_BROADCAST_MAX_DOCS = 200_000  # batches up to this size are broadcast against the prior index

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
        T.StructField("text", T.StringType()),  # kept only when verifying exactly (null otherwise)
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


def _similarities(pairs: DataFrame, nodes: DataFrame, config: NearDedupConfig) -> DataFrame:
    """Attach each side's signature and text (null for prior documents) and score each pair.

    ``nodes`` has doc_id, signature, text; one join per side keeps the shuffles to two.
    """
    node = nodes.select("doc_id", "signature", "text")
    side_a = node.select(
        F.col("doc_id").alias("a"), F.col("signature").alias("sig_a"), F.col("text").alias("text_a")
    )
    side_b = node.select(
        F.col("doc_id").alias("b"), F.col("signature").alias("sig_b"), F.col("text").alias("text_b")
    )
    joined = pairs.join(side_a, "a").join(side_b, "b")
    columns = ["a", "b", "sig_a", "sig_b", "text_a", "text_b"]
    return joined.select(*columns).mapInArrow(_similarity_batches(config), _SIM_SCHEMA)


def _read_docs(spark: SparkSession, docs_parquet: list[str]) -> DataFrame:
    docs = spark.read.parquet(*docs_parquet)
    quality = F.col("quality_score") if "quality_score" in docs.columns else F.lit(None)
    return docs.select(
        F.col("doc_id").cast("string"),
        F.col("text").cast("string"),
        quality.cast("float").alias("quality_score"),
    )


def _prior_index(
    spark: SparkSession, prior_index_paths: list[str], batch_bands: DataFrame, hashed: DataFrame, n_docs: int
) -> tuple[DataFrame, DataFrame]:
    """Prior band entries in this batch's buckets (prior=True) and prior nodes (text null).

    Entries of a document that is also in this batch are dropped: a batch (wrongly) listed among its
    own priors must not dedup against itself. Small batches are broadcast, so the growing prior index
    is filtered where it is read instead of being shuffled.
    """
    prior_bands = spark.read.schema(_PRIOR_BANDS_SCHEMA).parquet(*[f"{p}/bands" for p in prior_index_paths])
    prior_sigs = spark.read.schema(_PRIOR_SIGS_SCHEMA).parquet(
        *[f"{p}/signatures" for p in prior_index_paths]
    )
    buckets = batch_bands.select("band", "band_hash")
    batch_ids = hashed.select("doc_id")
    if n_docs <= _BROADCAST_MAX_DOCS:
        buckets, batch_ids = F.broadcast(buckets), F.broadcast(batch_ids)
    bands = (
        prior_bands.join(buckets, ["band", "band_hash"], "left_semi")
        .join(batch_ids, "doc_id", "left_anti")
        .select("band", "band_hash", "doc_id", F.lit(True).alias("prior"))
    )
    nodes = prior_sigs.join(batch_ids, "doc_id", "left_anti").select(
        "doc_id",
        "quality_score",
        "signature",
        F.lit(None).cast("string").alias("text"),
        F.lit(True).alias("prior"),
    )
    return bands, nodes


def _candidate_pairs(bands: DataFrame, max_bucket_pairs: int) -> DataFrame:
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
        bands.groupBy("band", "band_hash")
        .agg(F.expr(members).alias("m"))
        .where(F.expr("size(m) > 1 AND exists(m, e -> NOT e.prior)"))
        .select(F.explode(F.expr(pairs_expr)).alias("p"))
        .where(~(F.col("p.x.prior") & F.col("p.y.prior")))
        .select(F.col("p.x.doc_id").alias("a"), F.col("p.y.doc_id").alias("b"))
        .distinct()
    )


_PART = "_part"


def _write_part(folder: Path, part: int, table: pa.Table) -> None:
    """One whole part as ``part-<part>.parquet``: pyarrow is byte-deterministic for the same rows."""
    target = folder / f"part-{part:05d}.parquet"
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    pq.write_table(table, str(temp), compression="zstd")
    os.replace(temp, target)


def _part_writer(folder: str, schema: pa.Schema):
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


_ARROW_TYPES = {
    T.StringType: pa.string(),
    T.LongType: pa.int64(),
    T.IntegerType: pa.int32(),
    T.FloatType: pa.float32(),
    T.BinaryType: pa.binary(),
}


def _arrow_schema(schema: T.StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, _ARROW_TYPES[type(f.dataType)]) for f in schema.fields])


_PRIOR_BANDS_SCHEMA = T.StructType(
    [
        T.StructField("band", T.IntegerType()),
        T.StructField("band_hash", T.LongType()),
        T.StructField("doc_id", T.StringType()),
    ]
)
_PRIOR_SIGS_SCHEMA = T.StructType(
    [
        T.StructField("doc_id", T.StringType()),
        T.StructField("quality_score", T.FloatType()),
        T.StructField("signature", T.BinaryType()),
    ]
)


def _count_rows(docs_parquet: list[str]) -> int:
    """Rows of the input files from their parquet footers (no Spark job)."""
    return ds.dataset(docs_parquet, format="parquet").count_rows()


def _survivor_key() -> Column:
    """Sort key of the survivor rule; the smallest key in a component wins.

    Prior documents first, then the highest quality (NaN above every number, null last, as Spark's
    descending order puts them), then the smallest doc id.
    """
    quality = F.col("quality_score")
    return F.struct(
        F.when(F.col("prior"), 0).otherwise(1).alias("prior_rank"),
        F.when(quality.isNull(), 2).when(F.isnan(quality), 0).otherwise(1).alias("quality_class"),
        F.when(F.isnan(quality), F.lit(0.0)).otherwise(-quality).alias("negative_quality"),
        F.col("node"),
    )


def _judge_losers(components: DataFrame, nodes: DataFrame, config: NearDedupConfig) -> DataFrame:
    """doc_id, cluster_id, survivor_id, survivor_is_prior, similarity for every non-survivor of this batch."""
    members = components.join(nodes.select(F.col("doc_id").alias("node"), "quality_score", "prior"), "node")
    survivors = (
        members.groupBy("component")
        .agg(F.min(_survivor_key()).alias("best"))
        .select(
            "component",
            F.col("best.node").alias("survivor_id"),
            (F.col("best.prior_rank") == 0).alias("survivor_is_prior"),
        )
    )
    losers = (
        members.where(~F.col("prior"))
        .join(survivors, "component")
        .where(F.col("node") != F.col("survivor_id"))
    )
    to_survivor = _similarities(
        losers.select(F.col("node").alias("a"), F.col("survivor_id").alias("b")), nodes, config
    )
    return losers.select(
        F.col("node").alias("doc_id"),
        F.col("component").alias("cluster_id"),
        "survivor_id",
        "survivor_is_prior",
    ).join(to_survivor.select(F.col("a").alias("doc_id"), "similarity"), "doc_id")


def run_near_dedup(
    spark: SparkSession,
    docs_parquet: list[str],
    prior_index_paths: list[str],
    out_index_path: str,
    config: NearDedupConfig,
) -> NearDedupOutcome:
    """Remove near-duplicates of this batch (against itself and the prior index); write its index.

    Spark actions per call: signatures (1), scored candidate pairs (1) and their counts (1); only when
    some pair passes the threshold: connected components (2 per round, usually 1-2 rounds) and the
    judged non-survivors (1); the index (2). Row counts come from parquet footers and the outputs.
    (Adaptive execution runs each shuffle of an action as its own job, so the UI shows ~35-40 jobs.)
    """
    started = time.perf_counter()
    bands, rows = config.lsh()
    docs = _read_docs(spark, docs_parquet)
    n_docs = _count_rows(docs_parquet)

    phases: dict[str, float] = {}
    mark = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        phases[name] = round(now - mark[0], 3)
        mark[0] = now

    sigs = docs.mapInArrow(_signature_batches(config, bands, rows), _SIG_SCHEMA).localCheckpoint(eager=True)
    lap("signatures")
    hashed = sigs.where(F.col("n_shingles") > 0)

    batch_bands = hashed.select("doc_id", F.posexplode("bands").alias("band", "band_hash")).select(
        F.col("band").cast("int"), "band_hash", "doc_id", F.lit(False).alias("prior")
    )
    nodes = hashed.select("doc_id", "quality_score", "signature", "text", F.lit(False).alias("prior"))
    if prior_index_paths:
        prior_bands, prior_sigs = _prior_index(spark, prior_index_paths, batch_bands, hashed, n_docs)
        batch_bands = batch_bands.unionByName(prior_bands)
        nodes = nodes.unionByName(prior_sigs)
    pairs = _candidate_pairs(batch_bands, config.max_bucket_pairs)
    scored = _similarities(pairs, nodes, config).localCheckpoint(eager=True)
    counts = scored.agg(
        F.count(F.lit(1)).alias("pairs"),
        F.count(F.when(F.col("similarity") >= config.threshold, 1)).alias("edges"),
    ).first()
    n_candidates, n_edges = int(counts["pairs"]), int(counts["edges"])
    lap("candidates_verify")

    iterations = 0
    if n_edges:
        components = connected_components(
            scored.where(F.col("similarity") >= config.threshold), src="a", dst="b"
        )
        iterations = components.iterations
        lap("components")
        # cached, not checkpointed: the collect below materialises it, the index's anti-join reuses it
        judged_df = _judge_losers(components.assignments, nodes, config).persist(StorageLevel.MEMORY_AND_DISK)
        judged = judged_df.toArrow()  # sorted on the driver: a Spark sort costs a sampling job
        removed_ids = judged_df.where(F.col("similarity") >= config.survivor_floor()).select("doc_id")
    else:
        judged = None
        removed_ids = None
    removed = _removed_table(judged, config.survivor_floor())
    lap("survivors")

    kept = hashed if removed_ids is None else hashed.join(removed_ids, "doc_id", "left_anti")
    index_rows = _write_index(kept, Path(out_index_path), config)
    if n_edges:
        judged_df.unpersist()
    lap("index")

    stats = {
        "docs": n_docs,
        "empty_docs": n_docs - index_rows - removed.num_rows,
        "bands": bands,
        "rows": rows,
        "candidate_pairs": n_candidates,
        "verified_edges": n_edges,
        # every component holds at least one non-survivor of this batch (edges always touch this batch
        # and a prior document outranks it), so the judged rows name every cluster
        "clusters": 0 if judged is None else len(pc.unique(judged.column("cluster_id"))),
        "removed": removed.num_rows,
        "removed_against_prior": int(pc.sum(removed.column("survivor_is_prior")).as_py() or 0),
        "chain_kept": 0 if judged is None else judged.num_rows - removed.num_rows,
        "cc_iterations": iterations,
        "prior_indexes": len(prior_index_paths),
        "seconds": round(time.perf_counter() - started, 3),
        "phase_seconds": phases,
        "config": config.fingerprint(),
    }
    logger.info("near-dup dedup: %s", stats)
    return NearDedupOutcome(removed=removed, index_rows=index_rows, stats=stats)


def _removed_table(judged: pa.Table | None, survivor_floor: float) -> pa.Table:
    """Judged non-survivors close enough to their survivor, in REMOVED_SCHEMA (sorted by doc_id)."""
    if judged is None or judged.num_rows == 0:
        return REMOVED_SCHEMA.empty_table()
    close = (
        judged.filter(pc.greater_equal(judged.column("similarity"), survivor_floor))
        .sort_by("doc_id")
        .sort_by("doc_id")
    )
    close = close.append_column("reason", pa.array([REASON] * close.num_rows, pa.string()))
    return close.select(REMOVED_SCHEMA.names).cast(REMOVED_SCHEMA)


def _write_index(kept: DataFrame, out: Path, config: NearDedupConfig) -> int:
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
