"""pHash near-dup: the Spark band join finds exactly the in-process pairs, and the survivor rule holds."""

from __future__ import annotations

import random

import pytest

from fm_assets.transforms.dedup.image_near_dup import (
    ImageNearDupConfig,
    candidate_pairs_local,
    candidate_pairs_spark,
    near_duplicate_removals,
    nodes_table,
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
