"""MinHash signatures: accuracy and speed against datasketch on real text, bad input, LSH parameters."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from datasketch import MinHash
from spark_planted import base_documents, jaccard, make_variant, shingle_set

from fm_assets.transforms.dedup.lsh_params import optimal_lsh_params
from fm_assets.transforms.dedup.minhash import EMPTY_VALUE, MinHasher, band_hashes, estimate_jaccard


def _datasketch(text: str) -> MinHash:
    m = MinHash(num_perm=128, seed=1)
    for shingle in shingle_set(text):
        m.update(" ".join(shingle).encode())
    return m


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    rng = random.Random(3)
    docs = base_documents(60)
    vocab = sorted({w for d in docs for w in d.split()})
    return [(d, make_variant(d, rng.uniform(0.4, 0.97), rng, vocab)) for d in docs]


def test_estimates_as_accurate_as_datasketch(pairs):
    hasher = MinHasher(num_perm=128)
    ours_a, ours_b = hasher.signatures([a for a, _ in pairs]), hasher.signatures([b for _, b in pairs])
    truth = np.array([jaccard(a, b) for a, b in pairs])
    ours = estimate_jaccard(ours_a, ours_b)
    theirs = np.array([_datasketch(a).jaccard(_datasketch(b)) for a, b in pairs])
    ours_mae, theirs_mae = np.abs(ours - truth).mean(), np.abs(theirs - truth).mean()
    assert ours_mae <= theirs_mae * 1.3 + 0.005, (ours_mae, theirs_mae)
    assert abs((ours - truth).mean()) < 0.02  # unbiased


@pytest.mark.slow
def test_signatures_much_faster_than_datasketch():
    docs = base_documents(300)
    hasher = MinHasher()
    hasher.signatures(docs[:5])
    t = time.perf_counter()
    hasher.signatures(docs)
    ours = time.perf_counter() - t
    sample = docs[:40]
    t = time.perf_counter()
    for doc in sample:
        _datasketch(doc)
    theirs = (time.perf_counter() - t) * len(docs) / len(sample)
    # the benchmark reports the real ratio (>= 20x); a loaded CI box gets some slack here
    assert theirs / ours >= 10, theirs / ours


def test_bad_input_is_handled():
    hasher = MinHasher()
    texts = [
        "",
        None,
        "word",
        "   ",
        "Hello   world,\n this is\ta test of spacing here",
        "hello world this is a test of spacing here",
        "東京は日本の首都であり大きな都市です",
        "東京は日本の首都であり大きな町です",
        "北京是中国的首都也是一个古老的城市",
    ]
    sigs = hasher.signatures(texts)
    assert (
        (sigs[0] == EMPTY_VALUE).all() and (sigs[1] == EMPTY_VALUE).all() and (sigs[3] == EMPTY_VALUE).all()
    )
    assert not (sigs[2] == EMPTY_VALUE).all()  # one word: a single shingle
    assert (sigs[4] == sigs[5]).all()  # whitespace and punctuation only
    assert estimate_jaccard(sigs[6], sigs[7]) > 0.3  # character n-grams for scripts without spaces
    assert estimate_jaccard(sigs[6], sigs[8]) < 0.1
    huge = " ".join(base_documents(3)) * 400  # ~0.4M words in one document, processed in chunks
    assert hasher.signatures([huge, "x"]).shape == (2, 128)


def test_signatures_are_deterministic_and_batch_independent(pairs):
    hasher = MinHasher()
    docs = [a for a, _ in pairs[:10]]
    whole = hasher.signatures(docs)
    one_by_one = np.vstack([hasher.signatures([d]) for d in docs])
    assert (whole == one_by_one).all()
    assert (band_hashes(whole, 14, 9) == band_hashes(one_by_one, 14, 9)).all()


def test_lsh_params_favour_recall_above_threshold():
    params = optimal_lsh_params(0.8, 128)
    assert params.bands * params.rows <= 128
    assert params.candidate_probability(0.85) >= 0.95
    assert params.candidate_probability(0.5) < 0.05
