"""Readable text of documentation pages for the sample corpus: Publican/Sphinx HTML (navigation chrome
dropped, main region kept) and GNOME Mallard ``.page`` files.

This is not the landing reader (``transforms.readers.html_text``, generic visible text of any page): it knows the
doc generators of the sample packages so the demo corpus holds prose, not menus."""

from __future__ import annotations

import re
from collections.abc import Callable

from lxml import etree
from lxml import html as lxml_html

# --------------------------------------------------------------------------------------------
# Text extraction


_HTML_BLOCKS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "br",
    ]
)
_MALLARD_BLOCKS = frozenset(
    [
        "page",
        "section",
        "title",
        "subtitle",
        "desc",
        "p",
        "item",
        "steps",
        "list",
        "terms",
        "tree",
        "note",
        "example",
        "quote",
        "synopsis",
        "screen",
        "listing",
        "table",
        "td",
        "th",
        "tr",
        "cite",
        "comment",
        "media",
        "figure",
        "links",
        "div",
    ]
)
# Mallard <code> is a block when it sits directly in a block container, inline inside a paragraph.
_MALLARD_BLOCK_CONTAINERS = frozenset(
    ["page", "section", "item", "note", "example", "td", "th", "figure", "listing", "div"]
)
_PRE_TAGS = frozenset({"pre", "screen", "listing"})
_DROP_TAGS = frozenset({"script", "style", "nav", "noscript", "template", "head", "svg", "button", "form"})
# Navigation chrome of Publican (debian-handbook) and Sphinx (python docs) pages.
_DROP_CLASSES = frozenset(
    {
        "docnav",
        "toc",
        "related",
        "sphinxsidebar",
        "footer",
        "headerlink",
        "breadcrumbs",
        "navheader",
        "navfooter",
        "mobile-nav",
        "skip-link",
    }
)
_DROP_IDS = frozenset({"banner", "title", "site-title", "breadcrumbs", "searchbox", "footer"})
_WS = re.compile(r"\s+")


def _local(tag: object) -> str:
    if not isinstance(tag, str):  # comments, processing instructions
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _is_chrome(el: etree._Element) -> bool:
    tag = _local(el.tag)
    if not tag or tag in _DROP_TAGS:
        return True
    classes = set((el.get("class") or "").split())
    return bool(classes & _DROP_CLASSES) or el.get("id") in _DROP_IDS or el.get("role") == "navigation"


def _collect_text(
    root: etree._Element,
    drop: Callable[[etree._Element], bool],
    is_block: Callable[[etree._Element, str], bool],
) -> str:
    """Readable text of ``root``: block elements start lines, inline whitespace collapses, pre keeps it."""
    parts: list[str] = []

    def walk(el: etree._Element, in_pre: bool) -> None:
        tag = _local(el.tag)
        if drop(el):
            return
        block = is_block(el, tag)
        pre = in_pre or tag in _PRE_TAGS or (block and tag == "code")
        if block:
            parts.append("\n")
        if el.text:
            parts.append(el.text if pre else _WS.sub(" ", el.text))
        for child in el:
            walk(child, pre)
            if child.tail:
                parts.append(child.tail if pre else _WS.sub(" ", child.tail))
        if block:
            parts.append("\n")

    walk(root, False)
    lines = (line.rstrip() for line in "".join(parts).split("\n"))
    text = "\n".join(line if line.strip() else "" for line in lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    # A leading space left by collapsed inline whitespace is not indentation.
    text = re.sub(r"(?m)^ (?=\S)", "", text)
    return text.strip()


def extract_html(data: bytes) -> tuple[str, str]:
    """(title, text) of an HTML/XHTML page, without scripts, styles and navigation chrome."""
    doc = lxml_html.document_fromstring(data)
    title_el = doc.find(".//title")
    title = _WS.sub(" ", title_el.text_content()).strip() if title_el is not None else ""
    main = doc.xpath("//*[@role='main']") or doc.xpath("//div[contains(concat(' ', @class, ' '), ' body ')]")
    root = main[0] if main else (doc.find("body") if doc.find("body") is not None else doc)
    return title, _collect_text(root, _is_chrome, lambda _el, tag: tag in _HTML_BLOCKS)


def extract_mallard(data: bytes) -> tuple[str, str]:
    """(title, text) of a Mallard ``.page`` (GNOME help); the <info> block (credits, links) is metadata."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True)
    root = etree.fromstring(data, parser=parser)
    if root is None:
        return "", ""
    title = ""
    for el in root:
        if _local(el.tag) == "title":
            title = _WS.sub(" ", "".join(el.itertext())).strip()
            break

    def drop(el: etree._Element) -> bool:
        tag = _local(el.tag)
        return not tag or tag in {"info", "include"}

    def is_block(el: etree._Element, tag: str) -> bool:
        if tag == "code":
            parent = el.getparent()
            return parent is not None and _local(parent.tag) in _MALLARD_BLOCK_CONTAINERS
        return tag in _MALLARD_BLOCKS

    return title, _collect_text(root, drop, is_block)
