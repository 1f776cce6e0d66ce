"""Gopher/C4 quality rules on real documentation text and on text built to trip each rule."""

import json
import re
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


def _plain_ngram_keys(ids, n):
    """The key definition, n-gram by n-gram: sum((ids[j + i] + 1) * M ** (n - 1 - i)) mod 2**64."""
    count = len(ids) - n + 1
    keys = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(n):
            keys = keys * quality._HASH_MULT + ids[i : i + count].astype(np.uint64) + np.uint64(1)
    return keys


def _reference_top(
    ids, lengths, n, total
):  # np.unique's definition: ties to the smallest key, its first start
    keys = _plain_ngram_keys(ids, n)
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    best = int(np.argmax(counts))
    return (
        0.0
        if counts[best] < 2
        else float(lengths[first[best] : first[best] + n].sum()) * int(counts[best]) / total
    )


def _reference_duplicate(ids, lengths, n, total):
    _, inverse, counts = np.unique(_plain_ngram_keys(ids, n), return_inverse=True, return_counts=True)
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
    keys = quality._ngram_keys(ids, range(1, 11))
    for n in range(1, 11):
        if words < n:
            assert len(keys[n]) == 0
            assert quality._top_ngram_char_fraction(keys[n], lengths, n, total) == 0.0
            assert quality._duplicate_ngram_char_fraction(keys[n], lengths, n, total) == 0.0
            continue
        assert keys[n].dtype == np.uint64 and np.array_equal(keys[n], _plain_ngram_keys(ids, n))
        assert quality._top_ngram_char_fraction(keys[n], lengths, n, total) == _reference_top(
            ids, lengths, n, total
        )
        assert quality._duplicate_ngram_char_fraction(keys[n], lengths, n, total) == _reference_duplicate(
            ids, lengths, n, total
        )


# Words that make per-word shortcuts go wrong if they are not exact: case pairs that lower-case alike, letters
# that lower-case to two characters or by context, numerals that are letters to \w but not digits, CJK.
TRICKY_WORDS = [
    "The", "the", "THE", "the,", "(and)", "İstanbul", "ΣΑΣ", "σας", "Straße", "STRASSE", "\u212aelvin", "ſite",
    "½", "²", "Ⅳ", "123", "_", "foo_bar", "#", "...", "…", "a...", "•", "-", "1.", "日本語", "中文字", "한국어",
    "privacy", "policy", "we", "use", "cookies", "Cookies", "JavaScript", "enable", "terms", "of", "lorem", "ipsum",
]  # fmt: skip
BLANKS = [" ", " ", " ", "\t", "\n", "\n", "\n\n", " \n", "\x1c", "\u3000", "\u2028", "\x85", "\n  \n"]


def _generated_text(rng: np.random.Generator) -> str:
    pieces = []
    for _ in range(int(rng.integers(0, 160))):
        pieces.append(TRICKY_WORDS[int(rng.integers(len(TRICKY_WORDS)))])
        pieces.append(BLANKS[int(rng.integers(len(BLANKS)))])
    return "".join(pieces)


def _plain_metrics(text, lang, cfg):
    """The per-word, per-line definitions of the metrics compute_metrics takes shortcuts for."""
    unspaced = quality._is_unspaced(text, lang)
    words = quality._words(text, unspaced)
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]

    def duplicates(items):
        seen, dup_items, dup_chars = set(), 0, 0
        for item in items:
            if item in seen:
                dup_items, dup_chars = dup_items + 1, dup_chars + len(item)
            seen.add(item)
        total = sum(len(item) for item in items)
        return (dup_items / len(items), dup_chars / total if total else 0.0) if items else (0.0, 0.0)

    n_words = len(words)
    boilerplate = re.compile("|".join(f"(?:{p})" for p in cfg.boilerplate_patterns))
    metrics = {
        "mean_word_length": sum(len(w) for w in words) / n_words if n_words else 0.0,
        "ellipsis_line_fraction": (
            sum(1 for line in lines if re.search(r"(\.\.\.|…)\s*$", line)) / len(lines) if lines else 0.0
        ),
        "bullet_line_fraction": (
            sum(1 for line in lines if quality._BULLET_LINE.match(line)) / len(lines) if lines else 0.0
        ),
        "alpha_word_fraction": (
            sum(1 for w in words if quality._LETTER.search(w)) / n_words if n_words else 0.0
        ),
        "stop_words": float(
            len(
                ({w.lower().strip(".,;:!?\"'()") for w in words} if not unspaced else set())
                & quality._ENGLISH_STOP_WORDS
            )
        ),
        "boilerplate_line_fraction": (
            sum(1 for line in lines if boilerplate.search(line.lower())) / len(lines) if lines else 0.0
        ),
    }
    metrics["duplicate_line_fraction"], metrics["duplicate_line_char_fraction"] = duplicates(lines)
    metrics["duplicate_paragraph_fraction"], metrics["duplicate_paragraph_char_fraction"] = duplicates(
        paragraphs
    )
    vocab: dict[str, int] = {}
    ids = np.array([vocab.setdefault(w.lower(), len(vocab)) for w in words], dtype=np.int64)
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    total = int(lengths.sum())
    scale = cfg.cjk_ngram_scale if unspaced else 1
    for n, _ in cfg.max_top_ngram_char_fraction:
        size = n * scale
        metrics[f"top_{n}gram_char_fraction"] = (
            _reference_top(ids, lengths, size, total) if n_words >= size and total else 0.0
        )
    for n, _ in cfg.max_duplicate_ngram_char_fraction:
        size = n * scale
        metrics[f"duplicate_{n}gram_char_fraction"] = (
            _reference_duplicate(ids, lengths, size, total) if n_words >= size and total else 0.0
        )
    return metrics


@pytest.mark.parametrize("seed", range(12))
def test_metrics_equal_their_per_word_and_per_line_definitions(seed):
    """compute_metrics counts per distinct word and skips the boilerplate lines by a required literal: the
    values stay exactly those of the plain definitions (tricky Unicode words, blank runs, every language mode)."""
    rng = np.random.default_rng(seed)
    configs = [
        QualityConfig(),
        QualityConfig(boilerplate_patterns=("kelvin", "site uses", "^privacy", "(a|b)c", "polic(y)?")),
    ]
    for _ in range(60):
        text = _generated_text(rng)
        for lang in ("en", None, "zh", "ko"):
            for cfg in configs:
                expected = _plain_metrics(text, lang, cfg)
                got = quality.compute_metrics(text, lang, cfg)
                assert {key: got[key] for key in expected} == expected, (text, lang)


def test_boilerplate_skip_needs_a_literal_in_every_match():
    assert quality._required_literal("(please )?(enable|turn on) javascript") == " javascript"
    assert quality._required_literal("terms (of use|of service)") == "terms "
    assert quality._required_literal("cookies?") == "cookie"
    # No shortcut where a literal is not certain: alternatives at the top, anchors, escapes, flags.
    for pattern in ("a|b", "(a|b)", "^privacy", r"privacy\b", "[a-z]+ policy", "(?i)privacy"):
        assert quality._required_literal(pattern) is None
    # A line that matches only after lower-casing (Kelvin sign) is still found.
    text = "intro line\nthis \u212aelvin line\nend"
    lines = text.split("\n")
    assert quality._boilerplate_line_fraction(lines, text.lower(), ("kelvin",)) == 1 / 3
