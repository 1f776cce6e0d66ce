"""Decontamination n-gram index: exact and reformatted overlaps are found, unrelated text is not."""

import json
from pathlib import Path

import numpy as np
import pytest
import xxhash

from fm_assets.transforms.text import decontam
from fm_assets.transforms.text.decontam import ContaminationIndex, load_default_eval_index, load_eval_texts

EVAL = [item["text"] for item in load_eval_texts()]
FIXTURE = Path(__file__).parent / "data" / "gnome_help_multilingual.jsonl"
GNOME = [json.loads(line)["text"] for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def test_shipped_eval_set_has_provenance():
    items = load_eval_texts()
    assert len(items) >= 50
    assert {item["license"] for item in items} == {"PSF-2.0"}
    assert all(item["source"].startswith("deb://python3.11-doc/") for item in items)


def test_exact_copy_matches_fully_and_unrelated_text_not_at_all():
    index = ContaminationIndex.build(EVAL[:10], n=13)
    matches, fraction = index.check(EVAL[3])
    assert matches > 50 and fraction == 1.0
    assert index.check(GNOME[0]) == (0, 0.0)


def test_case_whitespace_and_punctuation_do_not_hide_overlap():
    index = ContaminationIndex.build([EVAL[5]], n=13)
    mangled = EVAL[5].upper().replace(" ", "  \n").replace(",", " ;")
    _, fraction = index.check(mangled)
    assert fraction == 1.0


def test_partial_overlap_fraction():
    index = ContaminationIndex.build([EVAL[0]], n=13)
    mixed = GNOME[0] + "\n\n" + EVAL[0]
    matches, fraction = index.check(mixed)
    assert 0.3 < fraction < 0.9
    assert matches == index.check(EVAL[0])[0]


def test_short_text_and_empty_index():
    index = ContaminationIndex.build(EVAL[:2], n=13)
    assert index.check("only a few words here") == (0, 0.0)
    assert ContaminationIndex.build([], n=13).check(EVAL[0]) == (0, 0.0)


def test_fingerprint_and_save_load(tmp_path):
    a = ContaminationIndex.build(EVAL[:5], n=13)
    assert a.fingerprint() == ContaminationIndex.build(list(reversed(EVAL[:5])), n=13).fingerprint()
    assert a.fingerprint() != ContaminationIndex.build(EVAL[:5], n=8).fingerprint()
    assert a.fingerprint() != ContaminationIndex.build(EVAL[:4], n=13).fingerprint()
    a.save(tmp_path / "idx.npz")
    b = ContaminationIndex.load(tmp_path / "idx.npz")
    assert b.n == 13 and b.fingerprint() == a.fingerprint()


def test_default_index_flags_the_tutorial_not_gnome_help():
    index = load_default_eval_index()
    assert len(index) > 10_000
    assert index is load_default_eval_index()  # cached
    assert index.check(EVAL[-1])[1] == 1.0
    assert all(index.check(text) == (0, 0.0) for text in GNOME)


def _plain_ngram_hashes(text, n):
    """The definition, word by word: xxh3-64 of each UTF-8 word, keys = sum(h[j + i] * M ** (n - 1 - i))."""
    words = decontam.tokenize(text)
    if len(words) < n:
        return np.empty(0, dtype=np.uint64)
    hashes = np.array([xxhash.xxh3_64_intdigest(w.encode("utf-8")) for w in words], dtype=np.uint64)
    count = len(words) - n + 1
    keys = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(n):
            keys = keys * decontam._MULT + hashes[i : i + count]
    return keys


def test_ngram_hashes_equal_their_word_by_word_definition():
    for text in [*EVAL[:10], *GNOME, "Straße İstanbul ΣΑΣ 日本語 " * 5, "one two"]:
        for n in (1, 3, 13):
            got = decontam.ngram_hashes(text, n)
            assert got.dtype == np.uint64
            assert np.array_equal(got, _plain_ngram_hashes(text, n))


@pytest.mark.parametrize("indexed", [1, 20])
def test_check_counts_exactly_the_keys_in_the_index(indexed):
    """check() skips keys whose low-bit bucket is empty: the count stays that of a plain membership test
    (a 1-text index has few buckets, so many keys share a bucket without being in the index)."""
    index = ContaminationIndex.build(EVAL[:indexed], n=5)
    members = set(index.hashes.tolist())
    partial = 0
    for text in [*EVAL[:30], *GNOME[:10], EVAL[0][: len(EVAL[0]) // 2] + GNOME[0]]:
        keys = decontam.ngram_hashes(text, 5).tolist()
        expected = sum(key in members for key in keys)
        assert index.check(text) == (expected, expected / len(keys) if keys else 0.0)
        partial += 0 < expected < len(keys)
    assert partial >= 1
