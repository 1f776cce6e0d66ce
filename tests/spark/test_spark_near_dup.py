"""Near-duplicate job on planted real-text near-duplicates: quality vs exact Jaccard, cross-batch, re-runs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_planted import base_documents, jaccard, planted_corpus

from fm_assets.transforms.dedup.near_dup.job import NearDedupConfig, run_near_dedup

pytestmark = pytest.mark.spark
THRESHOLD = 0.8


def _quality(corpus, removed: pa.Table, ids: set[str] | None = None) -> dict[str, float]:
    """Recall over planted pairs with J >= t+0.05; precision and worst similarity of removals."""
    index = {d: i for i, d in enumerate(corpus.doc_ids)}
    cluster: dict[str, str] = {}
    for row in removed.to_pylist():
        cluster[row["doc_id"]] = row["cluster_id"]
        cluster.setdefault(row["survivor_id"], row["cluster_id"])
    positives = [
        (i, j)
        for i, j, sim in corpus.family_pairs()
        if sim >= THRESHOLD + 0.05 and (ids is None or corpus.doc_ids[i] in ids or corpus.doc_ids[j] in ids)
    ]
    found = sum(
        1
        for i, j in positives
        if cluster.get(corpus.doc_ids[i]) is not None
        and cluster.get(corpus.doc_ids[i]) == cluster.get(corpus.doc_ids[j])
    )
    sims = [
        jaccard(corpus.texts[index[r["doc_id"]]], corpus.texts[index[r["survivor_id"]]])
        for r in removed.to_pylist()
    ]
    return {
        "recall": found / len(positives),
        "precision": sum(s >= THRESHOLD - 0.05 for s in sims) / max(1, len(sims)),
        "min_removed_similarity": min(sims, default=1.0),
        "positives": len(positives),
    }


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*.parquet")):
        h.update(str(f.relative_to(folder)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def corpus():
    return planted_corpus(70)


def test_quality_against_exact_jaccard_and_reruns(spark, corpus, tmp_path):
    docs = corpus.write(str(tmp_path / "docs.parquet"))
    config = NearDedupConfig(threshold=THRESHOLD, local_max_docs=0)
    first = run_near_dedup(spark, [docs], [], str(tmp_path / "index-a"), config)
    q = _quality(corpus, first.removed)
    assert q["positives"] > 200
    assert q["recall"] >= 0.95, q
    assert q["precision"] >= 0.95, q
    assert q["min_removed_similarity"] >= THRESHOLD - 0.1, q
    assert set(first.removed.column("reason").to_pylist()) == {"near_duplicate"}
    # whitespace-only copies are always removed, survivors are the high-quality base documents
    removed_ids = set(first.removed.column("doc_id").to_pylist())
    assert {d for d in corpus.doc_ids if d.startswith("w")} <= removed_ids
    assert all(s.startswith("b") for s in first.removed.column("survivor_id").to_pylist())
    assert first.index_rows == len(corpus.doc_ids) - first.removed.num_rows

    second = run_near_dedup(spark, [docs], [], str(tmp_path / "index-b"), config)
    assert second.removed.equals(first.removed)
    assert _digest(tmp_path / "index-a") == _digest(tmp_path / "index-b")


def test_cross_batch_dedup_against_prior_index(spark, corpus, tmp_path):
    first_rows = [i for i, d in enumerate(corpus.doc_ids) if d.startswith("b") or d.endswith(("-3", "-5"))]
    second_rows = [i for i in range(len(corpus.doc_ids)) if i not in set(first_rows)]
    batch1 = corpus.write(str(tmp_path / "b1.parquet"), first_rows)
    batch2 = corpus.write(str(tmp_path / "b2.parquet"), second_rows)
    config = NearDedupConfig(threshold=THRESHOLD, local_max_docs=0)
    run_near_dedup(spark, [batch1], [], str(tmp_path / "idx1"), config)
    out = run_near_dedup(spark, [batch2], [str(tmp_path / "idx1")], str(tmp_path / "idx2"), config)
    second_ids = {corpus.doc_ids[i] for i in second_rows}
    q = _quality(corpus, out.removed, second_ids)
    assert q["recall"] >= 0.95, q
    assert q["min_removed_similarity"] >= THRESHOLD - 0.1, q
    assert out.stats["removed_against_prior"] > 100
    prior_survivors = (
        out.removed.filter(pa.compute.field("survivor_is_prior")).column("survivor_id").to_pylist()
    )
    assert all(s.startswith("b") for s in prior_survivors)
    again = run_near_dedup(spark, [batch2], [str(tmp_path / "idx1")], str(tmp_path / "idx2-again"), config)
    assert again.removed.equals(out.removed)
    assert _digest(tmp_path / "idx2") == _digest(tmp_path / "idx2-again")


def test_bad_input_documents(spark, tmp_path):
    text = base_documents(1)[0]
    rows = {
        "doc_id": ["empty", "blank", "one", "one-again", "cjk-a", "cjk-b", "ws-a", "ws-b", "huge", "plain"],
        "text": [
            "",
            "  \n\t ",
            "word",
            "word",
            "東京は日本の首都であり大きな都市です。人口も多い。",
            "東京は日本の首都であり大きな都市です。人口も多い",
            text,
            "\n\n".join(text.split()),
            " ".join(base_documents(5)) * 200,
            "something else entirely different here and now",
        ],
        "quality_score": [None] * 10,
    }
    path = str(tmp_path / "bad.parquet")
    pq.write_table(
        pa.table(
            rows,
            schema=pa.schema(
                [("doc_id", pa.string()), ("text", pa.large_string()), ("quality_score", pa.float32())]
            ),
        ),
        path,
    )
    out = run_near_dedup(spark, [path], [], str(tmp_path / "idx"), NearDedupConfig(local_max_docs=0))
    removed = dict(
        zip(
            out.removed.column("doc_id").to_pylist(),
            out.removed.column("survivor_id").to_pylist(),
            strict=True,
        )
    )
    assert removed == {"one-again": "one", "cjk-b": "cjk-a", "ws-b": "ws-a"}
    assert out.stats["empty_docs"] == 2 and out.stats["docs"] == 10
