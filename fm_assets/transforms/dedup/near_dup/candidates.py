"""Candidate pairs from LSH band buckets (this batch plus the matching prior-index entries), scored.

Pairs inside a bucket: all pairs up to ``max_bucket_pairs`` members, a star to the bucket's smallest
id above that, never a pair of two prior documents. Scoring is exact n-gram Jaccard when both documents
are in this batch and ``verify_exact``, otherwise the MinHash estimate (prior documents keep only
their signature).

Each step has a Spark form (DataFrames) and an in-process form for small batches (:mod:`.local`):
:func:`bucket_pairs` is :func:`candidate_pairs` on numpy arrays, and both score through the same
:func:`similarity_batches` (the in-process path through :func:`score_pairs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fm_assets.transforms.dedup.minhash import estimate_jaccard, exact_jaccard_of_nodes, exact_jaccard_pairs
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.index import PRIOR_BANDS_SCHEMA, PRIOR_SIGS_SCHEMA

_BROADCAST_MAX_DOCS = 200_000  # batches up to this size are broadcast against the prior index

_SIM_SCHEMA = T.StructType(
    [
        T.StructField("a", T.StringType()),
        T.StructField("b", T.StringType()),
        T.StructField("similarity", T.DoubleType()),
        T.StructField("exact", T.BooleanType()),
    ]
)


def prior_index(
    spark: SparkSession, prior_index_paths: list[str], batch_bands: DataFrame, hashed: DataFrame, n_docs: int
) -> tuple[DataFrame, DataFrame]:
    """Prior band entries in this batch's buckets (prior=True) and prior nodes (text null).

    Entries of a document that is also in this batch are dropped: a batch (wrongly) listed among its
    own priors must not dedup against itself. Small batches are broadcast, so the growing prior index
    is filtered where it is read instead of being shuffled.
    """
    prior_bands = spark.read.schema(PRIOR_BANDS_SCHEMA).parquet(*[f"{p}/bands" for p in prior_index_paths])
    prior_sigs = spark.read.schema(PRIOR_SIGS_SCHEMA).parquet(*[f"{p}/signatures" for p in prior_index_paths])
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


def candidate_pairs(bands: DataFrame, max_bucket_pairs: int) -> DataFrame:
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


def similarity_batches(
    config: NearDedupConfig,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
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


def similarities(pairs: DataFrame, nodes: DataFrame, config: NearDedupConfig) -> DataFrame:
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
    return joined.select(*columns).mapInArrow(similarity_batches(config), _SIM_SCHEMA)


def bucket_pairs(
    band: np.ndarray, band_hash: np.ndarray, member: np.ndarray, prior: np.ndarray, max_bucket_pairs: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`candidate_pairs` in-process: distinct (a, b) node numbers with a < b sharing a bucket.

    ``member`` numbers the nodes in ``doc_id`` order (unique), so sorting a bucket by it is Spark's
    ``sort_array(collect_list(struct(doc_id, prior)))``; the same all-pairs / star rule and the same
    exclusion of prior-prior pairs follow. Buckets of one size are expanded together (triangular indices).
    """
    empty = np.empty(0, dtype=np.int64)
    if len(member) == 0:
        return empty, empty
    order = np.lexsort((member, band_hash, band))
    band, band_hash, member, prior = band[order], band_hash[order], member[order], prior[order]
    n = len(member)
    first = np.ones(n, dtype=bool)
    first[1:] = (band[1:] != band[:-1]) | (band_hash[1:] != band_hash[:-1])
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, n))
    fresh = np.add.reduceat((~prior).astype(np.int64), starts)
    live = (sizes > 1) & (fresh > 0)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    star = live & (sizes > max_bucket_pairs)
    if star.any():
        s_starts, s_sizes = starts[star], sizes[star]
        centre = np.repeat(s_starts, s_sizes - 1)
        step = np.arange(int((s_sizes - 1).sum()), dtype=np.int64) - np.repeat(
            np.cumsum(s_sizes - 1) - (s_sizes - 1), s_sizes - 1
        )
        xs.append(centre)
        ys.append(centre + 1 + step)
    full = live & ~star
    for size in np.unique(sizes[full]):
        g_starts = starts[full & (sizes == size)]
        i, j = np.triu_indices(int(size), 1)
        xs.append((g_starts[:, None] + i[None, :]).ravel())
        ys.append((g_starts[:, None] + j[None, :]).ravel())
    if not xs:
        return empty, empty
    x, y = np.concatenate(xs), np.concatenate(ys)
    keep = ~(prior[x] & prior[y])
    a, b = member[x[keep]].astype(np.int64), member[y[keep]].astype(np.int64)
    span = int(member.max()) + 1
    pairs = np.unique(a * span + b)
    return pairs // span, pairs % span


def score_pairs(a: np.ndarray, b: np.ndarray, nodes: pa.Table, config: NearDedupConfig) -> np.ndarray:
    """Similarity (float64) of node pairs (row numbers of ``nodes``: doc_id, signature, text): the values of
    :func:`similarity_batches` (the Spark path's scoring) pair for pair, with each node's signature unpacked
    and its text shingled once for all its pairs rather than once per pair."""
    if len(a) == 0:
        return np.empty(0, dtype=np.float64)
    packed = b"".join(nodes.column("signature").to_pylist())
    sigs = np.frombuffer(packed, dtype="<u4").reshape(nodes.num_rows, config.num_perm)
    similarity = np.asarray(estimate_jaccard(sigs[a], sigs[b]), dtype=np.float64)
    if config.verify_exact:
        text = nodes.column("text").combine_chunks()
        valid = np.asarray(text.is_valid())
        idx = np.flatnonzero(valid[a] & valid[b])
        if len(idx):
            similarity[idx] = exact_jaccard_of_nodes(text, a[idx], b[idx], config.ngram, config.seed)
    return similarity
