"""Near-duplicate images and video clips by 64-bit perceptual hashes: banded candidate join, Hamming check,
clusters, survivors.

A node carries a *sequence* of pHashes (``phashes``): one for an image, one per keyframe for a video clip
(F keyframes at the same relative times of their windows, so keyframe i of one clip is aligned with keyframe
i of another). The distance of two sequences of equal length n is the **mean** Hamming distance over aligned
positions, kept exact as the integer total: a pair is near when ``total <= max_distance * n`` (for an image,
n = 1: the plain Hamming distance). Sequences of different lengths (clips cut under another keyframe count)
never pair. Why the mean and not the max: a resized, re-encoded copy drifts a few bits on *every* keyframe,
which the mean measures, while a frame-rate change can move one keyframe across a scene cut (a different
picture, 25-35 bits), which the max would turn into a miss; a different video that shares one frame with
another (a title card, a fade to black) still differs by ~32 bits on the other keyframes, so its mean stays
far above the threshold (``tests/transforms/dedup/test_image_near_dup.py`` pins both).

Pigeonhole banding (``transforms.image.phash.band_keys``): with ``max_distance + 1`` bands, two hashes within
``max_distance`` bits share at least one band key. The mean of n aligned distances is at least their minimum,
so two sequences within the mean threshold have at least one aligned position within ``max_distance`` bits;
band keys are taken for every position with the position in the key (``position << 48``; position 0, every
image, gives the image keys unchanged), so the candidate pairs are exactly the pairs sharing a key (an
equi-join) and no near pair is missed. Candidates are confirmed with the total distance. The join runs on
Spark (``candidate_pairs_spark``) or, for small inputs, in-process (``candidate_pairs_local``); both return
the same confirmed pairs.

Confirmed pairs form clusters and each cluster keeps one survivor, both computed by ``clusters`` (the module
text near-dup calls): an image already in an earlier batch's index wins (it was released earlier), then the
highest quality (here: pixel count), then the smallest id. ``cluster_id`` is the smallest id in the cluster.
A member of this batch is removed when its mean distance to its survivor is within ``max_distance``; farther
chain members are kept.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from fm_assets.transforms.dedup.clusters import min_label_components, survivors_in_process
from fm_assets.transforms.image.phash import as_int64, as_uint64, band_keys, bands_for_distance, hamming

POSITION_SHIFT = (
    48  # band keys use bits 0..39 (band index << 32 | band bits); the keyframe position goes above
)

REASON = "near_duplicate"

# nodes of the graph: this batch's images and earlier batches' kept images
NODES_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field(
            "phash", pa.int64(), nullable=False
        ),  # the 64 bits as signed int64 (as_int64); a clip's middle
        pa.field("phashes", pa.list_(pa.int64()), nullable=False),  # every keyframe's (an image: [phash])
        pa.field("quality", pa.int64(), nullable=False),  # pixel count: the larger image survives
        pa.field("batch", pa.string(), nullable=False),
        pa.field("prior", pa.bool_(), nullable=False),
    ]
)


@dataclass(frozen=True)
class ImageNearDupConfig:
    version: str = "phash-sequence-near-dup-v2"  # v2: every keyframe of a clip, mean over aligned keyframes
    max_distance: int = 8  # mean Hamming bits between aligned 64-bit pHashes
    # engine choice, not output: fewer nodes than this join in-process (identical pairs), else on Spark
    local_max_nodes: int = 200_000

    @property
    def bands(self) -> int:
        return bands_for_distance(self.max_distance)

    def fingerprint(self) -> dict[str, Any]:
        config = asdict(self)
        config.pop("local_max_nodes")
        return {**config, "bands": self.bands, "hash": "phash64", "sequence_distance": "mean"}


@dataclass(frozen=True)
class Removal:
    doc_id: str
    cluster_id: str
    survivor_id: str
    survivor_batch: str
    distance: int  # total Hamming bits over the aligned positions (an image: the Hamming distance)
    survivor_is_prior: bool
    position_distances: tuple[int, ...] = ()  # per aligned position (keyframe)

    @property
    def mean_distance(self) -> float:
        return self.distance / max(len(self.position_distances), 1)


def position_distances(a: list[int], b: list[int]) -> tuple[int, ...] | None:
    """Hamming bits at every aligned position of two pHash sequences; ``None`` when their lengths differ."""
    if len(a) != len(b) or not a:
        return None
    return tuple(hamming(as_uint64(x), as_uint64(y)) for x, y in zip(a, b, strict=True))


def is_near(distances: tuple[int, ...] | None, max_distance: int) -> bool:
    """The mean of the aligned distances is within ``max_distance`` (exact: total <= max_distance * n)."""
    return distances is not None and sum(distances) <= max_distance * len(distances)


def sequence_band_keys(hashes: list[int], bands: int) -> list[int]:
    """Band keys of every position of a pHash sequence, the position in bits 48 and up."""
    return [
        (position << POSITION_SHIFT) | key
        for position, h in enumerate(hashes)
        for key in band_keys(as_uint64(h), bands)
    ]


def _band_rows(nodes: pa.Table, bands: int) -> tuple[np.ndarray, np.ndarray]:
    """(node index, band key) for every node, position and band."""
    per_node = [sequence_band_keys(h, bands) for h in nodes["phashes"].to_pylist()]
    index = np.repeat(np.arange(len(per_node), dtype=np.int64), [len(k) for k in per_node])
    keys = np.array([k for node in per_node for k in node], dtype=np.int64)
    return index, keys


def _confirmed(nodes: pa.Table, pairs: set[tuple[int, int]], max_distance: int) -> list[tuple[int, int, int]]:
    hashes = nodes["phashes"].to_pylist()
    prior = nodes["prior"].to_pylist()
    found = []
    for a, b in sorted(pairs):
        if prior[a] and prior[b]:  # settled by earlier batches
            continue
        distances = position_distances(hashes[a], hashes[b])
        if distances is not None and is_near(distances, max_distance):
            found.append((a, b, sum(distances)))
    return found


def candidate_pairs_local(nodes: pa.Table, config: ImageNearDupConfig) -> list[tuple[int, int, int]]:
    """Confirmed pairs (a < b node indexes, total distance) by an in-process hash join on band keys."""
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
    hashes = nodes["phashes"].to_pylist()
    prior = nodes["prior"].to_pylist()
    bands = spark.createDataFrame(
        [(int(n), int(k), hashes[n], bool(prior[n])) for n, k in zip(index, keys, strict=True)],
        "node long, key long, h array<long>, prior boolean",
    )
    left = bands.select(F.col("node").alias("a"), "key", F.col("h").alias("ha"), F.col("prior").alias("pa"))
    right = bands.select(F.col("node").alias("b"), "key", F.col("h").alias("hb"), F.col("prior").alias("pb"))
    total = "aggregate(zip_with(ha, hb, (x, y) -> bit_count(x ^ y)), 0, (acc, d) -> acc + d)"
    joined = (
        left.join(right, "key")
        .where((F.col("a") < F.col("b")) & ~(F.col("pa") & F.col("pb")) & (F.size("ha") == F.size("hb")))
        .select("a", "b", F.expr(total).alias("distance"), F.size("ha").alias("n"))
        .where(F.col("distance") <= F.col("n") * config.max_distance)
        .select("a", "b", "distance")
        .distinct()
    )
    return sorted((int(r["a"]), int(r["b"]), int(r["distance"])) for r in joined.collect())


def near_duplicate_removals(
    nodes: pa.Table, pairs: list[tuple[int, int, int]], max_distance: int
) -> list[Removal]:
    """Which images or clips of this batch go, by the survivor rule, with their cluster and survivor.

    Clusters and survivors come from ``clusters`` (the in-process engine text near-dup uses), with the
    nodes numbered in ``doc_id`` order so that "smallest node" is "smallest id" and the pixel count as the
    quality.
    """
    if not pairs:
        return []
    ids = nodes["doc_id"].to_pylist()
    hashes = nodes["phashes"].to_pylist()
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
        distances = position_distances(hashes[row], hashes[best])
        if distances is not None and is_near(distances, max_distance):
            removals.append(
                Removal(
                    ids[row],
                    ids[row_of[cluster]],
                    ids[best],
                    batch[best],
                    sum(distances),
                    bool(prior[best]),
                    distances,
                )
            )
    return sorted(removals, key=lambda r: r.doc_id)


def nodes_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Nodes from dicts with doc_id, phash (unsigned 64-bit int), quality, batch, prior and optionally
    phashes (every keyframe's pHash; ``[phash]`` when absent)."""
    return pa.Table.from_pylist(
        [
            {
                **row,
                "phash": as_int64(row["phash"]),
                "phashes": [as_int64(h) for h in row.get("phashes") or [row["phash"]]],
            }
            for row in rows
        ],
        schema=NODES_SCHEMA,
    )


def with_sequences(index: pa.Table) -> pa.Table:
    """An index written before sequences (no ``phashes`` column) with ``phashes = [phash]``."""
    if "phashes" in index.column_names:
        return index
    single = pa.array([[h] for h in index["phash"].to_pylist()], pa.list_(pa.int64()))
    return index.append_column("phashes", single)
