"""Image-text pairs from the ``debian-handbook`` package: every figure and screenshot with its alt text.

The package ships the handbook's HTML in ~26 languages under ``/usr/share/doc/debian-handbook/html/<locale>/``;
each ``<img>`` of a page (the shared ``Common_Content`` icons excluded) becomes one sample: the image file it
points to and its ``alt`` text as the caption (the figure title, "Figure 3.1. ..." without the number, when
there is no alt text). The same image appears once per language with a translated caption, and the image
files are hard links across languages: real exact duplicates, kept on purpose for the dedup stages.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

import lxml.etree as etree
import lxml.html

from fm_assets.sample_data.debian import iter_deb_files, lang_from_path
from fm_assets.sample_data.document import KNOWN_LICENSES
from fm_assets.sample_data.media_sample import MediaSample, sample_key

log = logging.getLogger(__name__)

PACKAGE = "debian-handbook"
HTML_ROOT = "/usr/share/doc/debian-handbook/html/"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif")
_WS = re.compile(r"\s+")
_PARSER = lxml.html.HTMLParser(
    encoding="utf-8"
)  # the handbook is UTF-8; lxml would guess Latin-1 without a meta tag
_FIGURE_NUMBER = re.compile(r"^\S*\s*[\d.]+\s*[.:：]?\s*")  # "Figure 3.1. ", "Abbildung 3.1. ", "图 3.1. "


def _wanted(path: str) -> bool:
    if not path.startswith(HTML_ROOT) or "/Common_Content/" in path:
        return False
    return path.endswith(".html") or path.lower().endswith(IMAGE_SUFFIXES)


def _clean(text: str | None) -> str:
    return _WS.sub(" ", text or "").strip()


def image_references(page_path: str, html: bytes) -> Iterator[tuple[str, str, str]]:
    """(image path inside the package, alt text, figure title) for each ``<img>`` of one page."""
    try:
        root = lxml.html.fromstring(html, parser=_PARSER)
    except (etree.ParserError, ValueError) as exc:
        log.warning("skipping unparsable %s (%s)", page_path, exc)
        return
    for img in root.iter("img"):
        src = img.get("src") or ""
        if not src or "://" in src or src.startswith(("data:", "Common_Content")):
            continue
        path = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), src))
        figure = next(
            (a for a in img.iterancestors("div") if "figure" in (a.get("class") or "").split()), None
        )
        title = ""
        if figure is not None:
            titles = figure.xpath(".//p[@class='title']")
            if titles:
                title = _FIGURE_NUMBER.sub("", _clean(titles[0].text_content()), count=1)
        yield path, _clean(img.get("alt")), title


def handbook_image_samples(deb: Path, package_version: str) -> Iterator[MediaSample]:
    """One sample per (language, image) pair referenced with a caption, in sorted key order."""
    pages: dict[str, bytes] = {}
    images: dict[str, bytes] = {}
    for path, data in iter_deb_files(deb, _wanted, hard_links=True):
        (pages if path.endswith(".html") else images)[path] = data
    license_id = KNOWN_LICENSES[PACKAGE]
    chosen: dict[str, MediaSample] = {}
    for page in sorted(pages):
        for path, alt, title in image_references(page, pages[page]):
            caption = alt if alt and not alt.lower().endswith(IMAGE_SUFFIXES) else title
            if path not in images or not caption:
                continue
            locale = path[len(HTML_ROOT) :].split("/", 1)[0]
            stem, ext = posixpath.splitext(posixpath.basename(path))
            key = sample_key(locale, stem)
            if key in chosen:  # the same picture on another page of the same language: first page wins
                continue
            chosen[key] = MediaSample(
                key=key,
                ext=ext.lstrip(".").lower(),
                media=images[path],
                text=caption,
                meta={
                    "license": license_id,
                    "source_package": PACKAGE,
                    "package_version": package_version,
                    "original_path": path,
                    "page": page,
                    "lang": lang_from_path(path),
                    "alt": alt,
                    "title": title,
                },
            )
    for key in sorted(chosen):
        yield chosen[key]
