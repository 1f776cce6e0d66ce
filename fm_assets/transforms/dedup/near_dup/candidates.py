"""Candidate pairs from LSH band buckets (this batch plus the matching prior-index entries), scored.

Pairs inside a bucket: all pairs up to ``max_bucket_pairs`` members, a star to the bucket's smallest
id above that, never a pair of two prior documents. Scoring is exact n-gram Jaccard when both documents
are in this batch and ``verify_exact``, otherwise the MinHash estimate (prior documents keep only
their signature).

This module is the Arrow/numpy half (no pyspark): :func:`bucket_pairs` (the in-process path's pairs) and the
scoring both paths share, :func:`similarity_batches` (Spark maps it; the in-process path calls it through
:class:`NodeScorer`). The Spark half, ``candidates_spark``, has the DataFrame forms: ``candidate_pairs`` is
:func:`bucket_pairs` on Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fm_assets.engine.pool import map_on_workers
from fm_assets.transforms.dedup.minhash import (
    estimate_jaccard,
    exact_jaccard_pairs,
    jaccard_of_unique,
    shingle_sets,
    shingle_sets_task,
)
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.docs import text_of_rows

SHINGLE_CHUNK_DOCS = 200  # texts per shingling task (at most 64 tasks): enough work to pay for its pickling
PAIR_CHUNK = 1000  # pairs per exact-scoring task (at most 64 tasks), shipped with their nodes' shingle sets

# what scoring returns per pair, on both paths (Spark maps similarity_batches into this schema)
SIM_SCHEMA = pa.schema(
    [("a", pa.string()), ("b", pa.string()), ("similarity", pa.float64()), ("exact", pa.bool_())]
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
                names=SIM_SCHEMA.names,
            )

    return compute


def bucket_pairs(
    band: np.ndarray, band_hash: np.ndarray, member: np.ndarray, prior: np.ndarray, max_bucket_pairs: int
) -> tuple[np.ndarray, np.ndarray]:
    """``candidates_spark.candidate_pairs`` in-process: distinct (a, b) node numbers with a < b sharing a bucket.

    ``member`` numbers the nodes in ``doc_id`` order (unique), so sorting a bucket by it is Spark's
    ``sort_array(collect_list(struct(doc_id, prior)))``; the same all-pairs / star rule and the same
    exclusion of prior-prior pairs follow. Buckets of one size are expanded together (triangular indices).
    """
    empty = np.empty(0, dtype=np.int64)
    shared = _hash_repeats(band_hash)
    band, band_hash, member, prior = band[shared], band_hash[shared], member[shared], prior[shared]
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


def _hash_repeats(band_hash: np.ndarray) -> np.ndarray:
    """Rows whose band hash another row has too (in any band): every bucket of two or more, so the rows left
    out are one-member buckets, which pair nothing. Most rows are, and one unstable sort of the hashes finds
    them several times faster than the three-key sort of every row."""
    order = np.argsort(band_hash)
    ordered = band_hash[order]
    repeat = np.zeros(len(order), dtype=bool)
    same = ordered[1:] == ordered[:-1]
    repeat[1:] |= same
    repeat[:-1] |= same
    shared = np.zeros(len(order), dtype=bool)
    shared[order] = repeat
    return shared


class NodeScorer:
    """Similarity (float64) of node pairs (row numbers of ``nodes``: doc_id, signature, text): the values of
    :func:`similarity_batches` (the Spark path's scoring) pair for pair. Signatures are unpacked once, and
    each node's text is shingled once for every pair and call it is in (the candidate edges, then the
    losers against their survivors). Texts to shingle, and then the pairs to score exactly (with their
    nodes' shingle sets), are cut into chunks that ``pool.map_on_workers`` spreads over the stage's workers
    when the caller runs inside ``pool.spread_over``.

    ``text_paths``: the nodes carry no text but where it is (``part``: an index into ``text_paths``, -1 for
    none; ``row``: the row in that Parquet file), and each shingling task reads its texts from one file, so
    the driver never holds the batch's text (on a 101 MB batch reading and reordering it was ~1 s of the
    driver's 2)."""

    def __init__(
        self, nodes: pa.Table, config: NearDedupConfig, text_paths: Sequence[str] | None = None
    ) -> None:
        self.config = config
        packed = b"".join(nodes.column("signature").to_pylist())
        self.signatures = np.frombuffer(packed, dtype="<u4").reshape(nodes.num_rows, config.num_perm)
        self.text_paths = list(text_paths) if text_paths is not None else None
        if self.text_paths is None:
            self.text = nodes.column("text").combine_chunks()
            self.valid = np.asarray(self.text.is_valid())
        else:
            self.part = np.asarray(nodes.column("part"), dtype=np.int32)
            self.row = np.asarray(nodes.column("row"), dtype=np.int64)
            self.valid = self.part >= 0
        self.sets: dict[int, np.ndarray] = {}  # node row -> its sorted distinct shingle hashes

    def score(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if len(a) == 0:
            return np.empty(0, dtype=np.float64)
        exact = self.valid[a] & self.valid[b] if self.config.verify_exact else np.zeros(len(a), dtype=bool)
        similarity = np.empty(len(a), dtype=np.float64)
        # the MinHash estimate only where no exact value replaces it (gathering the signatures is most of it)
        guess = ~exact
        similarity[guess] = estimate_jaccard(self.signatures[a[guess]], self.signatures[b[guess]])
        idx = np.flatnonzero(exact)
        if len(idx):
            self._shingle(np.unique(np.concatenate([a[idx], b[idx]])))
            similarity[idx] = self._exact(a[idx], b[idx])
        return similarity

    def _exact(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Exact Jaccard of shingled node pairs, in chunks that ``pool.map_on_workers`` spreads: the driver only
        packs each chunk's sets (a Python loop over tens of thousands of pairs was its largest serial piece)."""
        size = max(PAIR_CHUNK, -(-len(a) // 64))
        tasks = [self._packed(a[i : i + size], b[i : i + size]) for i in range(0, len(a), size)]
        return np.concatenate(map_on_workers(jaccard_pairs_task, tasks))

    def _packed(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One :func:`jaccard_pairs_task`: the pairs' distinct nodes' sets in one array, and the pairs as
        numbers of those nodes."""
        nodes, number = np.unique(np.concatenate([a, b]), return_inverse=True)
        sets = [self.sets[node] for node in nodes.tolist()]
        bounds = np.zeros(len(sets) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in sets], out=bounds[1:])
        return np.concatenate(sets), bounds, number[: len(a)], number[len(a) :]

    def _shingle(self, rows: np.ndarray) -> None:
        missing = [int(row) for row in rows if int(row) not in self.sets]
        if not missing:
            return
        if self.text_paths is not None:
            self._shingle_from_files(missing)
            return
        texts = self.text.take(pa.array(missing)).to_pylist()
        size = max(SHINGLE_CHUNK_DOCS, -(-len(texts) // 64))
        chunks = [
            (texts[i : i + size], self.config.ngram, self.config.seed) for i in range(0, len(texts), size)
        ]
        found = [s for chunk in map_on_workers(shingle_sets_task, chunks) for s in chunk]
        self.sets.update(zip(missing, found, strict=True))

    def _shingle_from_files(self, missing: list[int]) -> None:
        assert self.text_paths is not None
        nodes = np.asarray(missing, dtype=np.int64)
        by_part = nodes[np.lexsort((self.row[nodes], self.part[nodes]))]
        parts = self.part[by_part]
        groups = np.split(by_part, np.flatnonzero(np.diff(parts)) + 1)
        tasks = [
            (self.text_paths[int(self.part[g[0]])], self.row[g].tolist(), self.config.ngram, self.config.seed)
            for g in groups
        ]
        for group, found in zip(groups, map_on_workers(shingle_rows_task, tasks), strict=True):
            self.sets.update(zip(group.tolist(), found, strict=True))


def jaccard_pairs_task(task: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """:func:`.minhash.jaccard_of_unique` of node pairs (float64), on a worker process: ``(flat, bounds, a,
    b)``, node k's sorted distinct shingle hashes being ``flat[bounds[k]:bounds[k + 1]]``."""
    flat, bounds, a, b = task
    sets = [flat[start:end] for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]
    return np.array(
        [jaccard_of_unique(sets[i], sets[j]) for i, j in zip(a.tolist(), b.tolist(), strict=True)],
        dtype=np.float64,
    )


def shingle_rows_task(task: tuple[str, list[int], int, int]) -> list[np.ndarray]:
    """:func:`.minhash.shingle_sets` of ``rows`` of one Parquet file's text (``(path, rows, ngram, seed)``),
    read where it runs: one file per task, on a worker process."""
    path, rows, ngram, seed = task
    return shingle_sets(text_of_rows(path, rows), ngram, seed)
