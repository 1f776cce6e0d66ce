"""The in-process half of ``clusters``: min-label components and the survivor rule every near-dup path uses."""

from __future__ import annotations

import random
from itertools import pairwise

import numpy as np
import pyarrow as pa

from fm_assets.transforms.dedup.clusters import min_label_components, survivors_in_process


def _union_find(n: int, edges: list[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(x) for x in range(n)]


def test_min_label_components_label_each_node_with_its_components_smallest_node():
    rng = random.Random(7)
    chain = list(range(100, 160))
    rng.shuffle(chain)  # a long chain numbered out of order: many propagation rounds without pointer jumping
    edges = list(pairwise(chain))
    edges += [(60, 60 + i) for i in range(1, 30)]  # a star
    edges += [(rng.randrange(40), rng.randrange(40)) for _ in range(35)]  # random, with self loops
    a = np.array([e[0] for e in edges], dtype=np.int64)
    b = np.array([e[1] for e in edges], dtype=np.int64)
    labels, rounds = min_label_components(a, b, 170)
    assert labels.tolist() == _union_find(170, edges)
    assert labels[165] == 165  # a node without edges is its own component
    assert rounds < 20


def test_survivor_rule_prior_then_quality_then_smallest_node():
    component = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
    node = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    prior = np.array([False, False, True, False, False, False, False, False, False, False])
    quality = pa.array([9.0, 8.0, 1.0, 0.5, None, float("nan"), 2.0, 2.0, None, None], pa.float64())
    survivor = survivors_in_process(component, node, prior, quality)
    # 0: the earlier batch's member wins over higher quality; 1: NaN ranks above numbers, null below them;
    # 2: equal quality, smallest node; 3: all null, smallest node
    assert survivor.tolist() == [2, 2, 2, 5, 5, 5, 6, 6, 8, 8]


def test_integer_quality_is_ranked_as_numbers():
    """Image near-dup passes pixel counts (int64): the larger image survives, then the smaller node."""
    component = np.zeros(3, dtype=np.int64)
    quality = pa.array([640 * 480, 1920 * 1080, 1920 * 1080], pa.int64())
    survivor = survivors_in_process(component, np.array([5, 7, 6]), np.zeros(3, dtype=bool), quality)
    assert survivor.tolist() == [6, 6, 6]
