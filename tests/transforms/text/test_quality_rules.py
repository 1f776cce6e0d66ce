"""Gopher/C4 quality rules on real documentation text and on text built to trip each rule."""

import json
from pathlib import Path

import numpy as np
import pytest

from fm_assets.transforms.text import quality
from fm_assets.transforms.text.decontam import load_eval_texts
from fm_assets.transforms.text.quality import QualityConfig, evaluate_quality

FIXTURE = Path(__file__).parent / "data" / "gnome_help_multilingual.jsonl"
DOCS = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]
TUTORIAL = [item["text"] for item in load_eval_texts()]


def rules(result):
    return [name for name, _ in result.failed]


def test_real_python_tutorial_sections_mostly_pass():
    # The few that fail are code-heavy sections (list literals, repeated REPL lines): 58 of 65 pass.
    results = [evaluate_quality(text, "en") for text in TUTORIAL]
    passed = sum(r.passed for r in results)
    assert passed / len(results) >= 0.85
    assert all(0.0 <= r.score <= 1.0 for r in results)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d["url"][34:])
def test_real_translations_pass_including_unspaced_scripts(doc):
    result = evaluate_quality(doc["text"], doc["lang"])
    assert result.passed, result.failed


def test_cjk_text_counts_characters_not_spaces():
    zh = next(d["text"] for d in DOCS if d["lang"] == "zh" and "backup" in d["url"])
    assert len(zh.split()) < 50  # whitespace words would fail min_words...
    result = evaluate_quality(zh, "zh")
    assert result.metrics["unspaced"] == 1.0
    assert result.metrics["words"] >= 50  # ...characters do not
    # Detected by script even when the language is unknown.
    assert evaluate_quality(zh, None).metrics["unspaced"] == 1.0


def test_short_text_fails_min_words():
    result = evaluate_quality("Click on Settings.", "en")
    assert rules(result)[0] == "min_words"
    assert result.failed[0][1] == {"value": 3.0, "threshold": 50}


def test_repeated_lines_fail_repetition_rules():
    text = TUTORIAL[0] + "\n" + "\n".join(["Buy cheap watches online now at our store"] * 40)
    failed = rules(evaluate_quality(text, "en"))
    assert "duplicate_line_fraction" in failed
    assert "duplicate_5gram_char_fraction" in failed
    assert evaluate_quality(text, "en").score < evaluate_quality(TUTORIAL[0], "en").score


def test_lorem_ipsum_boilerplate_and_bullets():
    assert "lorem_ipsum" in rules(evaluate_quality(TUTORIAL[1] + "\nLorem ipsum dolor sit amet.", "en"))
    cookie_lines = "\n".join(
        [
            "This website uses cookies to improve your experience.",
            "Read our privacy policy.",
            "Accept all cookies",
        ]
        * 5
    )
    assert "boilerplate_line_fraction" in rules(
        evaluate_quality(cookie_lines + "\n" + TUTORIAL[2][:400], "en")
    )
    bullets = "\n".join(f"- item number {i} in a long list of things" for i in range(60))
    assert "bullet_line_fraction" in rules(evaluate_quality(bullets, "en"))


def test_symbols_and_non_alpha_words():
    hashes = " ".join(["#include", "#define", "value", "#"] * 40)
    assert "symbol_word_ratio" in rules(evaluate_quality(hashes, "en"))
    numbers = " ".join(str(n) for n in range(200))
    assert "alpha_word_fraction" in rules(evaluate_quality(numbers, "en"))


def test_curly_brace_rule_is_configurable():
    code_doc = next(t for t in TUTORIAL if "{" in t)
    assert "curly_brace" not in rules(evaluate_quality(code_doc, "en"))
    strict = QualityConfig(drop_curly_brace=True)
    assert "curly_brace" in rules(evaluate_quality(code_doc, "en", strict))


def test_stop_word_rule_only_for_english():
    german = next(d["text"] for d in DOCS if d["lang"] == "de")
    assert "stop_words" not in rules(evaluate_quality(german, "de"))
    assert "stop_words" in rules(evaluate_quality(german, "en"))


def test_fingerprint_is_stable_and_sensitive():
    assert QualityConfig().fingerprint() == QualityConfig().fingerprint()
    assert QualityConfig(min_words=51).fingerprint() != QualityConfig().fingerprint()
    assert QualityConfig(boilerplate_patterns=()).fingerprint() != QualityConfig().fingerprint()
    assert len(QualityConfig().fingerprint()) == 16


def _reference_top(
    ids, lengths, n, total
):  # np.unique's definition: ties to the smallest key, its first start
    keys = quality._ngram_keys(ids, n)
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    best = int(np.argmax(counts))
    return (
        0.0
        if counts[best] < 2
        else float(lengths[first[best] : first[best] + n].sum()) * int(counts[best]) / total
    )


def _reference_duplicate(ids, lengths, n, total):
    _, inverse, counts = np.unique(quality._ngram_keys(ids, n), return_inverse=True, return_counts=True)
    covered = np.zeros(len(ids), dtype=bool)
    for start in np.nonzero(counts[inverse] > 1)[0]:
        covered[start : start + n] = True
    return float(lengths[covered].sum()) / total


@pytest.mark.parametrize("seed", range(40))
def test_ngram_fractions_equal_their_np_unique_definition(seed):
    """The one-sort n-gram metrics give np.unique's values exactly, ties included (few distinct words)."""
    rng = np.random.default_rng(seed)
    words = int(rng.integers(1, 400))
    ids = rng.integers(0, int(rng.integers(1, 30)), size=words).astype(np.int64)
    lengths = rng.integers(1, 12, size=words).astype(np.int64)
    total = int(lengths.sum())
    for n in range(1, 11):
        if words < n:
            continue
        assert quality._top_ngram_char_fraction(ids, lengths, n, total) == _reference_top(
            ids, lengths, n, total
        )
        assert quality._duplicate_ngram_char_fraction(ids, lengths, n, total) == _reference_duplicate(
            ids, lengths, n, total
        )
