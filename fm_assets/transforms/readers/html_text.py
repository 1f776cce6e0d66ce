"""Visible text of an HTML document, via lxml's HTML parser.

Script, style and other non-visible elements are dropped with their content; block elements and
<br> become line breaks so paragraphs do not run together; runs of spaces collapse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import lxml.etree
import lxml.html

_INVISIBLE = frozenset({"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object"})
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
        "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
        "td", "tfoot", "th", "thead", "tr", "ul", "title", "caption", "br",
    }
)  # fmt: skip
_SPACES = re.compile(r"[^\S\n]+")
_BLANK_LINES = re.compile(r"\n\s*\n\s*(\n\s*)+")


@dataclass(slots=True)
class HtmlText:
    text: str
    title: str | None
    canonical_url: str | None


def _squash(text: str) -> str:
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def extract_html_text(html: bytes) -> HtmlText:
    """Parse ``html`` (UTF-8 bytes) and return its visible text, title and canonical URL."""
    parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
    root = lxml.html.document_fromstring(html, parser=parser)
    title_element = root.find(".//title")
    title = _squash(title_element.text_content()) if title_element is not None else None
    canonical = root.xpath("//link[@rel='canonical']/@href")
    parts: list[str] = []
    hidden_depth = 0
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        tag = element.tag if isinstance(element.tag, str) else ""
        if event == "start":
            if tag in _INVISIBLE:
                hidden_depth += 1
            elif hidden_depth == 0:
                if tag in _BLOCK:
                    parts.append("\n")
                if element.text:
                    parts.append(element.text)
        else:
            if tag in _INVISIBLE:
                hidden_depth -= 1
            elif hidden_depth == 0 and tag in _BLOCK:
                parts.append("\n")
            if hidden_depth == 0 and element.tail:
                parts.append(element.tail)
    return HtmlText(
        text=_squash("".join(parts)),
        title=title or None,
        canonical_url=str(canonical[0]).strip() if canonical else None,
    )
