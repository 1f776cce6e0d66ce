"""near-dup's NodeScorer: pair similarities equal the pairwise exact Jaccard (MinHash estimate where a text is
missing), whether the shingling runs in this process or on two workers, and each text is shingled once."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from fm_assets.engine.pool import spread_over
from fm_assets.transforms.dedup import minhash
from fm_assets.transforms.dedup.minhash import MinHasher, estimate_jaccard, exact_jaccard_pairs
from fm_assets.transforms.dedup.near_dup import candidates
from fm_assets.transforms.dedup.near_dup.candidates import NodeScorer
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig


def nodes_and_pairs(n: int = 450) -> tuple[pa.Table, np.ndarray, np.ndarray, list[str | None]]:
    rng = random.Random(7)
    words = [f"w{i}" for i in range(300)]
    base = [" ".join(rng.choice(words) for _ in range(60)) for _ in range(n // 3)]
    texts: list[str | None] = []
    for i in range(n):  # near-duplicates of a few bases, one word changed, and some prior nodes without text
        tokens = base[i % len(base)].split()
        tokens[rng.randrange(len(tokens))] = rng.choice(words)
        texts.append(None if i % 17 == 0 else " ".join(tokens))
    config = NearDedupConfig()
    hasher = MinHasher(num_perm=config.num_perm, ngram=config.ngram, seed=config.seed)
    sigs = hasher.signatures([t or "" for t in texts])
    nodes = pa.table(
        {
            "doc_id": [f"d{i:04d}" for i in range(n)],
            "signature": [np.ascontiguousarray(row, dtype="<u4").tobytes() for row in sigs],
            "text": pa.array(texts, pa.string()),
        }
    )
    a = np.array([rng.randrange(n) for _ in range(900)], dtype=np.int64)
    b = (a + len(base) * np.array([rng.randrange(1, 3) for _ in range(900)])) % n
    return nodes, a, b, texts


def expected(nodes: pa.Table, a: np.ndarray, b: np.ndarray, texts: list[str | None]) -> np.ndarray:
    config = NearDedupConfig()
    sigs = np.frombuffer(b"".join(nodes.column("signature").to_pylist()), "<u4").reshape(-1, config.num_perm)
    out = np.asarray(estimate_jaccard(sigs[a], sigs[b]), dtype=np.float64)
    both = [i for i in range(len(a)) if texts[a[i]] is not None and texts[b[i]] is not None]
    out[both] = exact_jaccard_pairs(
        [texts[a[i]] for i in both], [texts[b[i]] for i in both], config.ngram, config.seed
    )
    return out


def test_scores_equal_pairwise_exact_jaccard_in_process_and_on_two_workers(monkeypatch) -> None:
    nodes, a, b, texts = nodes_and_pairs()
    want = expected(nodes, a, b, texts)
    assert 0.2 < float(np.mean(want > 0.7)) < 1.0  # pairs above and below the threshold
    monkeypatch.setattr(candidates, "SHINGLE_CHUNK_DOCS", 50)  # several chunks, so two workers share them
    in_process = NodeScorer(nodes, NearDedupConfig()).score(a, b)
    with spread_over(2):
        on_workers = NodeScorer(nodes, NearDedupConfig()).score(a, b)
    assert np.array_equal(in_process, want)
    assert np.array_equal(on_workers, want)


def test_each_text_is_shingled_once_across_calls(monkeypatch) -> None:
    nodes, a, b, _ = nodes_and_pairs()
    shingled: list[int] = []
    real = minhash.shingle_sets

    def counting(texts, ngram, seed):
        shingled.append(len(texts))
        return real(texts, ngram, seed)

    monkeypatch.setattr(minhash, "shingle_sets", counting)
    scorer = NodeScorer(nodes, NearDedupConfig())
    scorer.score(a, b)
    first = sum(shingled)
    scorer.score(b[:100], a[:100])  # nodes already shingled: nothing new
    assert sum(shingled) == first == len(scorer.sets)


def test_texts_read_from_their_files_score_the_same_in_process_and_on_two_workers(tmp_path) -> None:
    """The stage's path: nodes carry where their text is (file index, row), not the text; each shingling
    task reads one file's rows where it runs."""
    import pyarrow.parquet as pq

    nodes, a, b, texts = nodes_and_pairs()
    want = expected(nodes, a, b, texts)
    paths: list[str] = []
    part: list[tuple[int, int, int]] = []  # (node, file or -1, row)
    for k in range(3):  # every third node's text in file k, at a row of its own (shuffled within the file)
        members = list(range(k, len(texts), 3))[::-1]
        paths.append(str(tmp_path / f"p{k}.parquet"))
        pq.write_table(
            pa.table({"text": pa.array([texts[i] for i in members], pa.large_string())}), paths[-1]
        )
        for r, i in enumerate(members):
            part.append((i, -1 if texts[i] is None else k, r))
    part.sort()
    located = (
        nodes.drop_columns(["text"])
        .append_column("part", pa.array([p for _, p, _ in part], pa.int32()))
        .append_column("row", pa.array([r for _, _, r in part], pa.int64()))
    )
    in_process = NodeScorer(located, NearDedupConfig(), text_paths=paths).score(a, b)
    with spread_over(2):
        on_workers = NodeScorer(located, NearDedupConfig(), text_paths=paths).score(a, b)
    assert np.array_equal(in_process, want)
    assert np.array_equal(on_workers, want)
