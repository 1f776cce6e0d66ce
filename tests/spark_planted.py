"""Real-text corpora with planted near-duplicates at known Jaccard, shared by the Spark tests and bench.

Base documents are windows of the CPython reference documentation that ships with every Python
(``pydoc_data.topics``); variants replace words at evenly spread positions until the exact word-5-gram
Jaccard reaches a target. Ground truth is computed here with plain Python sets, independently of
``fm_assets.transforms.dedup.minhash``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

_WORD = re.compile(r"[^\W_]+")
VARIANT_TARGETS = (0.97, 0.92, 0.87, 0.78, 0.65, 0.5)


def real_words() -> list[str]:
    import pydoc_data.topics

    text = "\n".join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics))
    return text.split()


def shingle_set(text: str, n: int = 5) -> set[tuple[str, ...]]:
    tokens = _WORD.findall(text.lower())
    if len(tokens) < n:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def jaccard(a: str, b: str, n: int = 5) -> float:
    sa, sb = shingle_set(a, n), shingle_set(b, n)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def base_documents(count: int, min_words: int = 120, max_words: int = 400, seed: int = 0) -> list[str]:
    """Non-overlapping windows of real text; beyond the source size, shuffled sentence mixes."""
    rng = random.Random(seed)
    words = real_words()
    docs: list[str] = []
    pos = 0
    while len(docs) < count and pos + max_words < len(words):
        size = rng.randint(min_words, max_words)
        docs.append(" ".join(words[pos : pos + size]))
        pos += size + 40
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", " ".join(words)) if len(s.split()) >= 6]
    while len(docs) < count:
        picked: list[str] = []
        while sum(len(s.split()) for s in picked) < rng.randint(min_words, max_words):
            picked.append(rng.choice(sentences))
        docs.append(" ".join(picked))
    return docs


def make_variant(text: str, target: float, rng: random.Random, vocabulary: list[str]) -> str:
    """Replace words at spread positions until word-5-gram Jaccard drops to about ``target``."""
    words = text.split()
    if target >= 1.0:
        return "  \n".join(words)  # whitespace-only change
    n = len(words)
    shingles = max(1, n - 4)
    edits = max(1, round(shingles * (1 - target) / (5 * (1 + target))))
    positions = sorted(rng.sample(range(n), min(n, edits)))
    for p in positions:
        words[p] = rng.choice(vocabulary) + "x"
    return " ".join(words)


@dataclass
class PlantedCorpus:
    doc_ids: list[str]
    texts: list[str]
    quality: list[float]
    family: list[int]  # index of the base document each doc derives from

    def table(self) -> pa.Table:
        return pa.table(
            {
                "doc_id": pa.array(self.doc_ids, pa.string()),
                "text": pa.array(self.texts, pa.large_string()),
                "quality_score": pa.array(self.quality, pa.float32()),
            }
        )

    def write(self, path: str, rows: list[int] | None = None) -> str:
        table = self.table() if rows is None else self.table().take(rows)
        pq.write_table(table, path)
        return path

    def family_pairs(self) -> list[tuple[int, int, float]]:
        """Every within-family pair (i, j) with its exact Jaccard (other pairs are near 0)."""
        by_family: dict[int, list[int]] = {}
        for i, f in enumerate(self.family):
            by_family.setdefault(f, []).append(i)
        sets = [shingle_set(t) for t in self.texts]
        out = []
        for members in by_family.values():
            for x in range(len(members)):
                for y in range(x + 1, len(members)):
                    i, j = members[x], members[y]
                    inter = len(sets[i] & sets[j])
                    union = len(sets[i] | sets[j]) or 1
                    out.append((i, j, inter / union))
        return out


def planted_corpus(
    bases: int, targets: tuple[float, ...] = VARIANT_TARGETS, seed: int = 0, whitespace_copies: bool = True
) -> PlantedCorpus:
    rng = random.Random(seed)
    base = base_documents(bases, seed=seed)
    vocabulary = sorted({w for doc in base[:50] for w in _WORD.findall(doc.lower())})
    ids, texts, quality, family = [], [], [], []
    for f, text in enumerate(base):
        ids.append(f"b{f:05d}")
        texts.append(text)
        quality.append(0.9)
        family.append(f)
        for k, target in enumerate(targets):
            ids.append(f"v{f:05d}-{k}")
            texts.append(make_variant(text, target, rng, vocabulary))
            quality.append(round(rng.uniform(0.1, 0.8), 3))
            family.append(f)
        if whitespace_copies and f % 10 == 0:
            ids.append(f"w{f:05d}")
            texts.append(make_variant(text, 1.0, rng, vocabulary))
            quality.append(0.5)
            family.append(f)
    return PlantedCorpus(ids, texts, quality, family)
