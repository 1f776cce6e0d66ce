"""Heuristic document quality rules in the style of Gopher (Rae et al. 2021) and C4 (Raffel et al. 2020).

``evaluate_quality`` returns every failed rule by name with its measured value and threshold (the
stage records the first as the reject reason and all of them as details) plus a score in [0, 1].

Languages written without spaces (zh, ja, th, ...): a "word" is one ideograph / kana / Thai-script
character, or a run of other letters and digits, so counts stay meaningful; the mean-word-length
rule and the English stop-word rule are skipped for them, and the n-gram repetition rules use
``cjk_ngram_scale`` times longer n-grams (one character carries less than one word). A text is
treated as unspaced when its language says so or when most of its letters are in such scripts.
Korean is spaced but one Hangul block packs 2-3 letters, so the mean-word-length rule skips it too.

Thresholds default to the published Gopher values where they hold up on technical documentation
(the real sample corpora); where they do not, the default is loosened and the comment says why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from typing import Any

import numpy as np

from fm_assets.engine.verdict import KEEP, Verdict

NO_SPACE_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "dz", "wuu", "yue", "gan"})
# One Hangul syllable block packs 2-3 letters, so Korean words are "short" by character count.
SHORT_WORD_LANGS = frozenset({"ko"})
_HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")

_UNSPACED_CHAR = (
    r"\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uf900-\ufaff\U00020000-\U0002fa1f"
)
_UNSPACED_TOKEN = re.compile(rf"[{_UNSPACED_CHAR}]|[^\s{_UNSPACED_CHAR}]+")
_UNSPACED_LETTER = re.compile(rf"[{_UNSPACED_CHAR}]")
_LETTER = re.compile(r"[^\W\d_]")
_BULLET_LINE = re.compile(r"^\s*([•●○◦▪▫‣⁃∙·\-*–—]|\d{1,3}[.)])\s")
_ELLIPSIS = ("...", "…")  # a line ending in one (lines are stripped: "(\.\.\.|…)\s*$" is endswith)
# Boilerplate patterns made of lower-case letters, digits, spaces, groups, alternatives and optional parts
# only (no escapes, classes, anchors, lookarounds or flags): every match holds their required literal.
_PLAIN_PATTERN = re.compile(r"(?:[a-z0-9 )|?]|\((?!\?))+")
_ENGLISH_STOP_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})


@dataclass(frozen=True)
class QualityConfig:
    """Thresholds of the quality rules; ``fingerprint()`` goes into the stage key."""

    min_words: int = 50
    max_words: int = 100_000
    min_mean_word_length: float = 3.0
    max_mean_word_length: float = 10.0
    max_symbol_word_ratio: float = 0.1
    max_ellipsis_line_fraction: float = 0.3
    max_bullet_line_fraction: float = 0.9
    min_alpha_word_fraction: float = 0.8
    min_stop_words: int = 2  # English only
    max_duplicate_line_fraction: float = 0.3
    max_duplicate_line_char_fraction: float = 0.2
    max_duplicate_paragraph_fraction: float = 0.3
    max_duplicate_paragraph_char_fraction: float = 0.2
    max_top_ngram_char_fraction: tuple[tuple[int, float], ...] = ((2, 0.20), (3, 0.18), (4, 0.16))
    # Twice Gopher's values: API references legitimately repeat phrases ("New in version 3.x",
    # "Return a new ... object"); at Gopher's values 40% of the Python docs pages fail.
    max_duplicate_ngram_char_fraction: tuple[tuple[int, float], ...] = (
        (5, 0.30),
        (6, 0.28),
        (7, 0.26),
        (8, 0.24),
        (9, 0.22),
        (10, 0.20),
    )
    cjk_ngram_scale: int = 2
    drop_lorem_ipsum: bool = True
    # C4 drops any page with "{"; that would drop most programming documentation, so it is off here.
    drop_curly_brace: bool = False
    boilerplate_patterns: tuple[str, ...] = (
        r"javascript (must|needs to|should) be (enabled|turned on)",
        r"(please )?(enable|turn on) javascript",
        r"(this|our) (web)?site uses cookies",
        r"we use cookies",
        r"(accept|allow) (all )?cookies",
        r"cookie (policy|settings|preferences)",
        r"privacy (policy|notice|statement)",
        r"terms (of use|of service|and conditions)",
    )
    max_boilerplate_line_fraction: float = 0.2
    extra: tuple[tuple[str, Any], ...] = field(default=())  # room for future knobs without a new field

    def fingerprint(self) -> str:
        """Stable sha256 (hex, 16 chars) of every threshold; changes whenever any threshold does."""
        payload = json.dumps(dataclasses.asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class QualityResult:
    failed: list[tuple[str, dict[str, Any]]]  # (rule name, {"value": ..., "threshold": ...})
    score: float  # in [0, 1], higher is better
    metrics: dict[str, float]

    @property
    def passed(self) -> bool:
        return not self.failed

    def verdict(self, lang: str | None) -> Verdict:
        """Drop on the first failed rule (details name every failed rule), else keep."""
        if not self.failed:
            return KEEP
        rule, details = self.failed[0]
        return Verdict.drop(
            f"quality:{rule}", {**details, "all_rules": [name for name, _ in self.failed], "lang": lang}
        )


def _is_unspaced(text: str, lang: str | None) -> bool:
    if lang and lang.split("-")[0].split("_")[0].lower() in NO_SPACE_LANGS:
        return True
    sample = text[:5000]
    if not _UNSPACED_LETTER.search(sample):  # the common case, decided without counting every letter
        return False
    letters = len(_LETTER.findall(sample))
    return letters > 0 and len(_UNSPACED_LETTER.findall(sample)) > 0.5 * letters


def _is_short_word_script(text: str, lang: str | None) -> bool:
    if lang and lang.split("-")[0].split("_")[0].lower() in SHORT_WORD_LANGS:
        return True
    sample = text[:5000]
    if not _HANGUL.search(sample):  # no Hangul at all: not a short-word script, whatever the letter count
        return False
    letters = len(_LETTER.findall(sample))
    return letters > 0 and len(_HANGUL.findall(sample)) > 0.5 * letters


def _words(text: str, unspaced: bool) -> list[str]:
    return _UNSPACED_TOKEN.findall(text) if unspaced else text.split()


_HASH_MULT = np.uint64(0x9E3779B97F4A7C15)


def _ngram_keys(ids: np.ndarray, sizes: Iterable[int]) -> dict[int, np.ndarray]:
    """Per n in ``sizes``: one uint64 key per n-gram start, the polynomial hash of its word ids,
    sum((ids[j + i] + 1) * M ** (n - 1 - i) for i < n) mod 2**64 (collisions are negligible); empty when
    there are fewer than n words. The keys of n words are those of n - 1 words times M plus the next word."""
    wanted = set(sizes)
    found: dict[int, np.ndarray] = {n: np.empty(0, dtype=np.uint64) for n in wanted}
    words = ids.astype(np.uint64) + np.uint64(1)
    keys = np.zeros(len(ids) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for n in range(1, min(max(wanted, default=0), len(ids)) + 1):
            count = len(ids) - n + 1
            keys = keys[:count] * _HASH_MULT + words[n - 1 : n - 1 + count]
            if n in wanted:
                found[n] = keys
    return found


def _top_ngram_char_fraction(keys: np.ndarray, lengths: np.ndarray, n: int, total_chars: int) -> float:
    """Characters of the most frequent n-gram times its count, over all word characters (Gopher). Ties go to
    the smallest key (``np.unique``'s order), measured at that n-gram's first occurrence. ``keys``: the
    n-gram keys of the words (``_ngram_keys``), ``lengths``: their lengths."""
    if len(keys) == 0 or total_chars == 0:
        return 0.0
    ordered = np.sort(keys)  # one unstable sort: equal keys only need to be adjacent
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, len(ordered)))
    best = int(np.argmax(counts))
    if counts[best] < 2:
        return 0.0
    start = int(np.argmax(keys == ordered[starts[best]]))
    return float(lengths[start : start + n].sum()) * int(counts[best]) / total_chars


def _duplicate_ngram_char_fraction(keys: np.ndarray, lengths: np.ndarray, n: int, total_chars: int) -> float:
    """Fraction of word characters covered by n-grams that occur more than once."""
    if len(keys) == 0 or total_chars == 0:
        return 0.0
    order = np.argsort(keys)  # unstable: only which keys repeat matters
    ordered = keys[order]
    same = ordered[1:] == ordered[:-1]
    repeated = np.zeros(len(keys), dtype=bool)
    repeated[1:] |= same
    repeated[:-1] |= same
    starts = order[repeated]
    if len(starts) == 0:
        return 0.0
    size = len(lengths) + 1
    cover = np.bincount(starts, minlength=size) - np.bincount(starts + n, minlength=size)
    covered = np.cumsum(cover[:-1]) > 0
    return float(lengths[covered].sum()) / total_chars


def _duplicate_fractions(items: list[str]) -> tuple[float, float]:
    """(fraction of items that repeat an earlier one, fraction of characters in those repeats)."""
    if not items:
        return 0.0, 0.0
    distinct = set(items)  # every occurrence after an item's first is a repeat
    total_chars = sum(map(len, items))
    dup_chars = total_chars - sum(map(len, distinct))
    return (len(items) - len(distinct)) / len(items), (dup_chars / total_chars if total_chars else 0.0)


def _required_literal(pattern: str) -> str | None:
    """For a plain pattern (``_PLAIN_PATTERN``): the longest run of characters outside groups and not made
    optional by ``?``, which every match contains; None for other patterns or when there is no such run."""
    if not _PLAIN_PATTERN.fullmatch(pattern):
        return None
    runs: list[str] = []
    run = ""
    depth = 0
    for ch in pattern:
        if ch in "()":
            depth += 1 if ch == "(" else -1
            runs.append(run)
            run = ""
        elif depth == 0 and ch == "|":
            return None  # alternatives at the top level: no literal is in every match
        elif depth == 0 and ch == "?":
            runs.append(run[:-1])
            run = ""
        elif depth == 0:
            run += ch
    return max([*runs, run], key=len) or None


@lru_cache(maxsize=8)
def _boilerplate_matcher(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], tuple[str, ...] | None]:
    """The patterns as one regex, and the literal each requires (None unless every pattern has one)."""
    literals = tuple(_required_literal(p) for p in patterns)
    required = None if None in literals else tuple(lit for lit in literals if lit is not None)
    return re.compile("|".join(f"(?:{p})" for p in patterns)), required


def _boilerplate_line_fraction(lines: Sequence[str], lower_text: str, patterns: tuple[str, ...]) -> float:
    """Fraction of lines (stripped, non-empty) in which a boilerplate pattern occurs (lower-cased)."""
    if not patterns:
        return 0.0
    pattern, required = _boilerplate_matcher(patterns)  # compiled first: a bad pattern fails on every text
    if not lines:
        return 0.0
    if required is not None and not any(literal in lower_text for literal in required):
        return 0.0  # most documents: a line that matched would hold a required literal, so would the text
    return sum(1 for line in lines if pattern.search(line.lower())) / len(lines)


def compute_metrics(text: str, lang: str | None, cfg: QualityConfig) -> dict[str, float]:
    """Every measurement the rules look at (also useful on its own for analysis)."""
    unspaced = _is_unspaced(text, lang)
    words = _words(text, unspaced)
    lines = [stripped for line in text.split("\n") if (stripped := line.strip())]
    paragraphs = [stripped for p in re.split(r"\n\s*\n", text) if (stripped := p.strip())]
    n_words = len(words)
    # Per-word measures are taken once per distinct word (in first-seen order) and weighted by its count.
    counts = Counter(words)
    lowered = list(map(str.lower, counts))
    vocab = dict.fromkeys(lowered)  # the lower-cased words, first seen first: word id = position here
    vocab_ids = dict(zip(vocab, range(len(vocab)), strict=True))
    word_ids = dict(zip(counts, map(vocab_ids.__getitem__, lowered), strict=True))
    ids = np.fromiter(map(word_ids.__getitem__, words), dtype=np.int64, count=n_words)
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=n_words)
    total_chars = int(lengths.sum())
    metrics: dict[str, float] = {
        "unspaced": float(unspaced),
        "short_word_script": float(unspaced or _is_short_word_script(text, lang)),
        "words": float(n_words),
    }
    metrics["mean_word_length"] = (total_chars / n_words) if n_words else 0.0
    symbols = text.count("#") + text.count("...") + text.count("…")
    metrics["symbol_word_ratio"] = symbols / n_words if n_words else 0.0
    metrics["ellipsis_line_fraction"] = (
        sum(map(str.endswith, lines, repeat(_ELLIPSIS))) / len(lines) if lines else 0.0
    )
    metrics["bullet_line_fraction"] = (
        len(list(filter(_BULLET_LINE.match, lines))) / len(lines) if lines else 0.0
    )
    alpha_words = sum(map(counts.__getitem__, filter(_LETTER.search, counts)))
    metrics["alpha_word_fraction"] = alpha_words / n_words if n_words else 0.0
    bare = set(map(str.strip, vocab, repeat(".,;:!?\"'()"))) if not unspaced else set()
    metrics["stop_words"] = float(len(bare & _ENGLISH_STOP_WORDS))
    metrics["duplicate_line_fraction"], metrics["duplicate_line_char_fraction"] = _duplicate_fractions(lines)
    (
        metrics["duplicate_paragraph_fraction"],
        metrics["duplicate_paragraph_char_fraction"],
    ) = _duplicate_fractions(paragraphs)

    scale = cfg.cjk_ngram_scale if unspaced else 1
    top_sizes = [n for n, _ in cfg.max_top_ngram_char_fraction]
    duplicate_sizes = [n for n, _ in cfg.max_duplicate_ngram_char_fraction]
    keys = _ngram_keys(ids, [n * scale for n in top_sizes + duplicate_sizes])
    for n in top_sizes:
        metrics[f"top_{n}gram_char_fraction"] = _top_ngram_char_fraction(
            keys[n * scale], lengths, n * scale, total_chars
        )
    for n in duplicate_sizes:
        metrics[f"duplicate_{n}gram_char_fraction"] = _duplicate_ngram_char_fraction(
            keys[n * scale], lengths, n * scale, total_chars
        )
    lower_text = text.lower()
    metrics["lorem_ipsum"] = float("lorem ipsum" in lower_text)
    metrics["curly_brace"] = float("{" in text)
    metrics["boilerplate_line_fraction"] = _boilerplate_line_fraction(
        lines, lower_text, cfg.boilerplate_patterns
    )
    return metrics


def _upper_bound(value: float, limit: float) -> float:
    """Soft pass in [0, 1]: 1 at value 0, falling linearly to 0 at the limit."""
    return max(0.0, 1.0 - value / limit) if limit > 0 else float(value <= limit)


def evaluate_quality(text: str, lang: str | None = None, cfg: QualityConfig | None = None) -> QualityResult:
    """Apply every rule of ``cfg``; ``failed`` lists (rule, {"value", "threshold"}) in rule order."""
    cfg = cfg or QualityConfig()
    m = compute_metrics(text, lang, cfg)
    unspaced = bool(m["unspaced"])
    failed: list[tuple[str, dict[str, Any]]] = []
    soft: list[float] = []

    def check(rule: str, ok: bool, value: float, threshold: Any, soft_pass: float) -> None:
        if not ok:
            failed.append((rule, {"value": round(value, 4), "threshold": threshold}))
        soft.append(soft_pass if ok else 0.0)

    words = m["words"]
    check("min_words", words >= cfg.min_words, words, cfg.min_words, 1.0)
    check("max_words", words <= cfg.max_words, words, cfg.max_words, 1.0)
    if not m["short_word_script"]:
        mwl = m["mean_word_length"]
        ok = cfg.min_mean_word_length <= mwl <= cfg.max_mean_word_length
        check("mean_word_length", ok, mwl, [cfg.min_mean_word_length, cfg.max_mean_word_length], 1.0)
    for rule, limit in (
        ("symbol_word_ratio", cfg.max_symbol_word_ratio),
        ("ellipsis_line_fraction", cfg.max_ellipsis_line_fraction),
        ("bullet_line_fraction", cfg.max_bullet_line_fraction),
        ("duplicate_line_fraction", cfg.max_duplicate_line_fraction),
        ("duplicate_line_char_fraction", cfg.max_duplicate_line_char_fraction),
        ("duplicate_paragraph_fraction", cfg.max_duplicate_paragraph_fraction),
        ("duplicate_paragraph_char_fraction", cfg.max_duplicate_paragraph_char_fraction),
        ("boilerplate_line_fraction", cfg.max_boilerplate_line_fraction),
        *((f"top_{n}gram_char_fraction", lim) for n, lim in cfg.max_top_ngram_char_fraction),
        *((f"duplicate_{n}gram_char_fraction", lim) for n, lim in cfg.max_duplicate_ngram_char_fraction),
    ):
        check(rule, m[rule] <= limit, m[rule], limit, _upper_bound(m[rule], limit))
    alpha = m["alpha_word_fraction"]
    lo = cfg.min_alpha_word_fraction
    check(
        "alpha_word_fraction",
        alpha >= lo,
        alpha,
        lo,
        (alpha - lo) / (1 - lo) if lo < 1 and alpha >= lo else 1.0,
    )
    english = (lang or "").lower().startswith("en")
    if english and not unspaced and cfg.min_stop_words > 0:
        check("stop_words", m["stop_words"] >= cfg.min_stop_words, m["stop_words"], cfg.min_stop_words, 1.0)
    if cfg.drop_lorem_ipsum:
        check("lorem_ipsum", not m["lorem_ipsum"], m["lorem_ipsum"], 0, 1.0)
    if cfg.drop_curly_brace:
        check("curly_brace", not m["curly_brace"], m["curly_brace"], 0, 1.0)
    score = sum(soft) / len(soft) if soft else 0.0
    return QualityResult(failed=failed, score=round(min(max(score, 0.0), 1.0), 6), metrics=m)
