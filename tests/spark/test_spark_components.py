"""Distributed connected components agree with a union-find, and with the in-process engine, on graphs with long
chains and stars."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fm_assets.transforms.dedup.clusters import connected_components, min_label_components

pytestmark = pytest.mark.spark


def _union_find(edges: list[tuple[str, str]]) -> dict[str, str]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in parent}


def test_large_small_star_matches_union_find(spark):
    rng = random.Random(5)
    chain = [(f"c{i:03d}", f"c{i + 1:03d}") for i in range(60)]  # diameter 60
    rng.shuffle(chain)
    star = [("s000", f"s{i:03d}") for i in range(1, 30)]
    random_graph = [(f"r{rng.randrange(40):03d}", f"r{rng.randrange(40):03d}") for _ in range(35)]
    edges = chain + star + random_graph + [("x", "x")]
    df = spark.createDataFrame(edges, "src string, dst string")
    result = connected_components(df)
    got = {r["node"]: r["component"] for r in result.assignments.collect()}
    expected = {k: v for k, v in _union_find(edges).items() if any(k in e for e in edges if e[0] != e[1])}
    assert got == expected
    assert result.iterations < 20
    # the in-process engine labels the same nodes with the same components
    names = sorted({n for e in edges for n in e})
    number = {name: i for i, name in enumerate(names)}
    a = np.array([number[e[0]] for e in edges], dtype=np.int64)
    b = np.array([number[e[1]] for e in edges], dtype=np.int64)
    labels, _ = min_label_components(a, b, len(names))
    assert {name: names[labels[number[name]]] for name in got} == got
