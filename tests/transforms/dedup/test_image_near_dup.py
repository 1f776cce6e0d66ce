"""pHash near-dup: the band join finds exactly the pairs within the distance (single hashes and keyframe
sequences by their mean), the Spark join the in-process pairs, and the survivor rule holds."""

from __future__ import annotations

import random

import pytest

from fm_assets.transforms.dedup.image_near_dup import (
    ImageNearDupConfig,
    candidate_pairs_local,
    candidate_pairs_spark,
    is_near,
    near_duplicate_removals,
    nodes_table,
    position_distances,
)
from fm_assets.transforms.image.phash import hamming

CONFIG = ImageNearDupConfig(max_distance=6)


def flip(h: int, bits: list[int]) -> int:
    for bit in bits:
        h ^= 1 << bit
    return h


def random_nodes(seed: int, clusters: int = 40, per_cluster: int = 3) -> list[dict]:
    """Clusters of hashes around random centres (0..8 bits flipped) plus earlier-batch ("prior") members."""
    rng = random.Random(seed)
    rows = []
    for c in range(clusters):
        centre = rng.getrandbits(64)
        for m in range(per_cluster):
            rows.append(
                {
                    "doc_id": f"c{c:03d}m{m}",
                    "phash": flip(centre, rng.sample(range(64), rng.randint(0, 8))),
                    "quality": rng.randint(1, 5) * 10_000,
                    "batch": "b0" if m == 0 and c % 4 == 0 else "b1",
                    "prior": m == 0 and c % 4 == 0,
                }
            )
    return rows


def test_local_join_finds_every_pair_within_the_distance_and_no_other():
    nodes = nodes_table(random_nodes(1))
    found = {(a, b) for a, b, _ in candidate_pairs_local(nodes, CONFIG)}
    hashes = [h & (2**64 - 1) for h in nodes["phash"].to_pylist()]
    prior = nodes["prior"].to_pylist()
    brute = {
        (a, b)
        for a in range(len(hashes))
        for b in range(a + 1, len(hashes))
        if not (prior[a] and prior[b]) and hamming(hashes[a], hashes[b]) <= CONFIG.max_distance
    }
    assert found == brute and found


def test_survivor_rule_prior_then_quality_then_id():
    rows = [
        {"doc_id": "a", "phash": 0, "quality": 100, "batch": "b1", "prior": False},
        {"doc_id": "b", "phash": 1, "quality": 900, "batch": "b1", "prior": False},
        {"doc_id": "c", "phash": 3, "quality": 10, "batch": "b0", "prior": True},
        {"doc_id": "d", "phash": 2**64 - 1, "quality": 900, "batch": "b1", "prior": False},
        {"doc_id": "e", "phash": 2**64 - 2, "quality": 900, "batch": "b1", "prior": False},
    ]
    nodes = nodes_table(rows)
    removed = near_duplicate_removals(nodes, candidate_pairs_local(nodes, CONFIG), CONFIG.max_distance)
    by_id = {r.doc_id: r for r in removed}
    assert set(by_id) == {"a", "b", "e"}  # the earlier batch's c survives its cluster; d beats e on id
    assert by_id["a"].survivor_id == "c" and by_id["a"].survivor_is_prior and by_id["a"].cluster_id == "a"
    assert by_id["e"].survivor_id == "d" and by_id["e"].cluster_id == "d" and by_id["e"].distance == 1


@pytest.mark.slow
@pytest.mark.spark
def test_spark_join_matches_the_in_process_join():
    from fm_assets.defs.resources.spark import get_or_create_session

    spark = get_or_create_session("local[2]")
    nodes = nodes_table(random_nodes(2, clusters=25))
    assert candidate_pairs_spark(spark, nodes, CONFIG) == candidate_pairs_local(nodes, CONFIG)
    clips = nodes_table(random_clip_nodes(4, clusters=20))
    assert candidate_pairs_spark(spark, clips, CONFIG) == candidate_pairs_local(clips, CONFIG)


def random_clip_nodes(seed: int, clusters: int = 30, per_cluster: int = 3, frames: int = 4) -> list[dict]:
    """Clips of F keyframe hashes: each cluster's members drift 0..14 bits per keyframe around its centres
    (so some pairs are near by the mean and not by every keyframe), plus a few of another keyframe count."""
    rng = random.Random(seed)
    rows = []
    for c in range(clusters):
        centres = [rng.getrandbits(64) for _ in range(frames)]
        for m in range(per_cluster):
            phashes = [flip(h, rng.sample(range(64), rng.choice([0, 1, 3, 6, 14]))) for h in centres]
            if c % 10 == 9 and m == 2:
                phashes = phashes[:2]  # another policy's clip: never pairs with a 4-keyframe clip
            rows.append(
                {
                    "doc_id": f"c{c:03d}m{m}@c000",
                    "phash": phashes[len(phashes) // 2],
                    "phashes": phashes,
                    "quality": 6144,
                    "batch": "b1",
                    "prior": m == 0 and c % 3 == 0,
                }
            )
    return rows


def test_keyframe_sequences_pair_exactly_when_their_mean_distance_is_within_the_limit():
    nodes = nodes_table(random_clip_nodes(3))
    found = {(a, b): d for a, b, d in candidate_pairs_local(nodes, CONFIG)}
    seqs = [[h & (2**64 - 1) for h in s] for s in nodes["phashes"].to_pylist()]
    prior = nodes["prior"].to_pylist()
    brute = {}
    for a in range(len(seqs)):
        for b in range(a + 1, len(seqs)):
            distances = position_distances(seqs[a], seqs[b])
            if not (prior[a] and prior[b]) and is_near(distances, CONFIG.max_distance):
                brute[(a, b)] = sum(distances or ())
    assert found == brute
    # the mean admits pairs that a max over keyframes would not: the banding must still find them
    assert any(max(position_distances(seqs[a], seqs[b]) or ()) > CONFIG.max_distance for a, b in found)


def test_clips_sharing_one_keyframe_are_not_near_and_a_drifted_copy_is():
    rng = random.Random(5)
    a = [rng.getrandbits(64) for _ in range(4)]
    other = [a[0], *(rng.getrandbits(64) for _ in range(3))]  # same title card, different video
    copy = [flip(h, rng.sample(range(64), 5)) for h in a]  # every keyframe drifted 5 bits (a re-encode)
    cut = [*copy[:3], rng.getrandbits(64)]  # one keyframe moved across a cut, the rest 5 bits off
    assert not is_near(position_distances(a, other), 8)
    assert is_near(position_distances(a, copy), 8)
    assert position_distances(a, a[:2]) is None
    rows = [
        {"doc_id": name, "phash": seq[2], "phashes": seq, "quality": 1, "batch": "b1", "prior": False}
        for name, seq in (("v1@c000", a), ("v2@c000", other), ("v3@c000", copy))
    ]
    nodes = nodes_table(rows)
    (removed,) = near_duplicate_removals(nodes, candidate_pairs_local(nodes, CONFIG), 8)
    assert (removed.doc_id, removed.survivor_id) == ("v3@c000", "v1@c000")
    assert removed.position_distances == (5, 5, 5, 5) and removed.mean_distance == 5.0
    assert sum(position_distances(a, cut) or ()) > 5 * 3  # the cut keyframe is far; the mean decides


def test_an_index_written_before_sequences_reads_as_one_hash_per_node():
    import pyarrow as pa

    from fm_assets.transforms.dedup.image_near_dup import NODES_SCHEMA, with_sequences

    old = pa.table({"doc_id": ["a", "b"], "phash": pa.array([5, -7], pa.int64()), "quality": [1, 2]})
    assert with_sequences(old)["phashes"].to_pylist() == [[5], [-7]]
    new = nodes_table(
        [{"doc_id": "c", "phash": 3, "phashes": [1, 3, 2], "quality": 1, "batch": "b", "prior": True}]
    )
    assert with_sequences(new).equals(new) and new.schema == NODES_SCHEMA
