"""The one place text becomes Markdown (report.md, audit.md, card.md): user-supplied strings are escaped.

A reason, reviewer or file name is data, never markup: ``escape`` makes HTML inert (``<script>`` becomes
``&lt;script&gt;``) and backslash-escapes the characters Markdown reads as emphasis, code, links, headings or
table cells, and folds line breaks, so every string shows as typed and cannot add a heading, a link, a table
column or a script to the report. ``table`` renders rows with every cell escaped unless it is ``Markup`` (text
the report itself formatted, such as a code span around a hash).
"""

from __future__ import annotations

from typing import Any

_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKDOWN = frozenset("\\`*[]|#~!")  # and ``_`` unless inside a word (``on_device`` stays readable)


class Markup(str):
    """Markdown the report wrote itself (a code span, a link it built): ``table`` leaves it as is."""


def escape(value: Any) -> str:
    """``value`` as Markdown text that renders exactly as written (no HTML, no emphasis, one line)."""
    if isinstance(value, Markup):
        return str(value)
    text = "" if value is None else " ".join(str(value).splitlines())
    out = []
    for at, char in enumerate(text):
        if char in _HTML:
            out.append(_HTML[char])
        elif char in _MARKDOWN or (char == "_" and not _inside_word(text, at)):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def _inside_word(text: str, at: int) -> bool:
    return 0 < at < len(text) - 1 and text[at - 1].isalnum() and text[at + 1].isalnum()


def table(header: list[str], rows: list[list[Any]], *, empty: str = "_none_") -> list[str]:
    """A Markdown table (lines plus a blank line); every cell escaped (``Markup`` cells kept)."""
    if not rows:
        return [empty, ""]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]
