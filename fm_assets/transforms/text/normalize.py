"""Text normalisation: Unicode NFC, no control characters, tidy whitespace. Idempotent.

Leading indentation of a line is kept (code listings in technical docs depend on it); runs of
spaces/tabs *inside* a line become one space.
"""

from __future__ import annotations

import re
import unicodedata

# C0/C1 controls and DEL, except \t and \n (\r is handled first, as a line break).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LINE_BREAKS = re.compile(r"\r\n|\r|\u2028|\u2029|\x85")
_INNER_SPACE = re.compile(r"(?<=\S)[ \t]*\t[ \t]*|(?<=\S) {2,}")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _normalize_line(line: str) -> str:
    return _INNER_SPACE.sub(" ", line).rstrip(" \t")


def normalize_text(text: str) -> str:
    """NFC, drop control characters but \\n and \\t, LF line ends, collapse inner blanks, trim."""
    text = _LINE_BREAKS.sub("\n", text)
    text = _CONTROL.sub("", text)
    text = unicodedata.normalize("NFC", text)
    text = "\n".join(_normalize_line(line) for line in text.split("\n"))
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()
