"""Text normalisation: Unicode NFC, no control characters, tidy whitespace. Idempotent.

Leading indentation of a line is kept (code listings in technical docs depend on it); runs of
spaces/tabs *inside* a line become one space.

The whole text is rewritten at once, not line by line: a run of blanks never holds a line break, so
the result is the same. A run that contains a tab is found by a pattern that starts with a lookbehind
(tried at every position), so it only runs when the text has a tab; a run of two or more spaces by
one that starts with the literal two spaces (``re`` scans for those fast).
"""

from __future__ import annotations

import re
import unicodedata

# C0/C1 controls and DEL, except \t and \n (\r is handled first, as a line break).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LINE_BREAK_CHARS = ("\r", "\u2028", "\u2029", "\x85")
_LINE_BREAKS = re.compile(r"\r\n|\r|\u2028|\u2029|\x85")
# A blank run after a non-blank character: with a tab anywhere in it, or of two or more spaces.
_TAB_RUN = re.compile(r"(?<=\S)[ \t]*\t[ \t]*")
_SPACE_RUN = re.compile(r"  (?<=\S  ) *")
_BLANK_RUNS = re.compile(r"\n\n\n+")


def normalize_text(text: str) -> str:
    """NFC, drop control characters but \\n and \\t, LF line ends, collapse inner blanks, trim."""
    if any(ch in text for ch in _LINE_BREAK_CHARS):
        text = _LINE_BREAKS.sub("\n", text)
    text = _CONTROL.sub("", text)
    text = unicodedata.normalize("NFC", text)
    if "\t" in text:
        text = _TAB_RUN.sub(" ", text)
    text = _SPACE_RUN.sub(" ", text)  # tab runs are gone, so what is left of a blank run is spaces
    text = "\n".join([line.rstrip(" \t") for line in text.split("\n")])
    text = _BLANK_RUNS.sub("\n\n", text)
    return text.strip()
