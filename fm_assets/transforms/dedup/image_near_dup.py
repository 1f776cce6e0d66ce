"""Near-duplicate images by 64-bit perceptual hash: banded candidate join, Hamming check, clusters, survivors.

Pigeonhole banding (``transforms.image.phash.band_keys``): with ``max_distance + 1`` bands, two hashes within
``max_distance`` bits share at least one band key, so the candidate pairs are exactly the pairs sharing a key
(an equi-join), confirmed with the Hamming distance. The join runs on Spark (``candidate_pairs_spark``) or,
for small inputs, in-process (``candidate_pairs_local``); both return the same confirmed pairs.

Confirmed pairs form clusters and each cluster keeps one survivor, both computed by ``clusters`` (the module
text near-dup calls): an image already in an earlier batch's index wins (it was released earlier), then the
highest quality (here: pixel count), then the smallest id. ``cluster_id`` is the smallest id in the cluster. A member of this batch is removed when
it is within ``max_distance`` of its survivor; farther chain members are kept.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from fm_assets.transforms.dedup.clusters import min_label_components, survivors_in_process
from fm_assets.transforms.image.phash import as_int64, as_uint64, band_keys, bands_for_distance, hamming

REASON = "near_duplicate"

# nodes of the graph: this batch's images and earlier batches' kept images
NODES_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("phash", pa.int64(), nullable=False),  # the 64 bits as signed int64 (as_int64)
        pa.field("quality", pa.int64(), nullable=False),  # pixel count: the larger image survives
        pa.field("batch", pa.string(), nullable=False),
        pa.field("prior", pa.bool_(), nullable=False),
    ]
)


@dataclass(frozen=True)
class ImageNearDupConfig:
    version: str = "image-phash-near-dup-v1"
    max_distance: int = 8  # Hamming bits between 64-bit pHashes
    # engine choice, not output: fewer nodes than this join in-process (identical pairs), else on Spark
    local_max_nodes: int = 200_000

    @property
    def bands(self) -> int:
        return bands_for_distance(self.max_distance)

    def fingerprint(self) -> dict[str, Any]:
        config = asdict(self)
        config.pop("local_max_nodes")
        return {**config, "bands": self.bands, "hash": "phash64"}


@dataclass(frozen=True)
class Removal:
    doc_id: str
    cluster_id: str
    survivor_id: str
    survivor_batch: str
    distance: int
    survivor_is_prior: bool


def _band_rows(nodes: pa.Table, bands: int) -> tuple[np.ndarray, np.ndarray]:
    """(node index, band key) for every node and band."""
    hashes = nodes["phash"].to_pylist()
    index = np.repeat(np.arange(len(hashes), dtype=np.int64), bands)
    keys = np.array([k for h in hashes for k in band_keys(as_uint64(h), bands)], dtype=np.int64)
    return index, keys


def _confirmed(nodes: pa.Table, pairs: set[tuple[int, int]], max_distance: int) -> list[tuple[int, int, int]]:
    hashes = nodes["phash"].to_pylist()
    prior = nodes["prior"].to_pylist()
    found = []
    for a, b in sorted(pairs):
        if prior[a] and prior[b]:  # settled by earlier batches
            continue
        distance = hamming(as_uint64(hashes[a]), as_uint64(hashes[b]))
        if distance <= max_distance:
            found.append((a, b, distance))
    return found


def candidate_pairs_local(nodes: pa.Table, config: ImageNearDupConfig) -> list[tuple[int, int, int]]:
    """Confirmed pairs (a < b node indexes, distance) by an in-process hash join on band keys."""
    index, keys = _band_rows(nodes, config.bands)
    buckets: dict[int, list[int]] = {}
    for node, key in zip(index.tolist(), keys.tolist(), strict=True):
        buckets.setdefault(key, []).append(node)
    pairs = {(a, b) for members in buckets.values() for i, a in enumerate(members) for b in members[i + 1 :]}
    return _confirmed(nodes, pairs, config.max_distance)


def candidate_pairs_spark(
    spark: Any, nodes: pa.Table, config: ImageNearDupConfig
) -> list[tuple[int, int, int]]:
    """The same pairs as ``candidate_pairs_local``: the band-key equi-join and the Hamming check on Spark."""
    from pyspark.sql import functions as F

    index, keys = _band_rows(nodes, config.bands)
    hashes = nodes["phash"].to_pylist()
    prior = nodes["prior"].to_pylist()
    bands = spark.createDataFrame(
        [(int(n), int(k), int(hashes[n]), bool(prior[n])) for n, k in zip(index, keys, strict=True)],
        "node long, key long, h long, prior boolean",
    )
    left = bands.select(F.col("node").alias("a"), "key", F.col("h").alias("ha"), F.col("prior").alias("pa"))
    right = bands.select(F.col("node").alias("b"), "key", F.col("h").alias("hb"), F.col("prior").alias("pb"))
    joined = (
        left.join(right, "key")
        .where((F.col("a") < F.col("b")) & ~(F.col("pa") & F.col("pb")))
        .select("a", "b", F.expr("bit_count(ha ^ hb)").alias("distance"))
        .where(F.col("distance") <= config.max_distance)
        .distinct()
    )
    return sorted((int(r["a"]), int(r["b"]), int(r["distance"])) for r in joined.collect())


def near_duplicate_removals(
    nodes: pa.Table, pairs: list[tuple[int, int, int]], max_distance: int
) -> list[Removal]:
    """Which images of this batch go, by the survivor rule, with their cluster and survivor.

    Clusters and survivors come from ``clusters`` (the in-process engine text near-dup uses), with the
    nodes numbered in ``doc_id`` order so that "smallest node" is "smallest id" and the pixel count as the
    quality.
    """
    if not pairs:
        return []
    ids = nodes["doc_id"].to_pylist()
    hashes = nodes["phash"].to_pylist()
    batch = nodes["batch"].to_pylist()
    prior = np.asarray(nodes["prior"].to_pylist(), dtype=bool)
    row_of = np.argsort(np.asarray(ids, dtype=object), kind="stable")  # node number -> row
    number = np.empty(len(ids), dtype=np.int64)
    number[row_of] = np.arange(len(ids), dtype=np.int64)  # row -> node number
    edges = np.asarray([(a, b) for a, b, _ in pairs], dtype=np.int64)
    a, b = number[edges[:, 0]], number[edges[:, 1]]
    label, _ = min_label_components(a, b, len(ids))
    members = np.unique(np.concatenate([a, b]))
    rows = row_of[members]
    survivor = survivors_in_process(
        label[members], members, prior[rows], nodes["quality"].take(pa.array(rows))
    )
    removals = []
    for row, cluster, best in zip(
        rows.tolist(), label[members].tolist(), row_of[survivor].tolist(), strict=True
    ):
        if row == best or prior[row]:
            continue
        distance = hamming(as_uint64(hashes[row]), as_uint64(hashes[best]))
        if distance <= max_distance:
            removals.append(
                Removal(ids[row], ids[row_of[cluster]], ids[best], batch[best], distance, bool(prior[best]))
            )
    return sorted(removals, key=lambda r: r.doc_id)


def nodes_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Nodes from dicts with doc_id, phash (unsigned 64-bit int), quality, batch, prior."""
    return pa.Table.from_pylist(
        [{**row, "phash": as_int64(row["phash"])} for row in rows], schema=NODES_SCHEMA
    )
