"""Video-text pairs from GNOME's Mallard help: every video figure with the text that describes it.

Three Debian packages ship real videos beside Mallard pages translated into many languages:
``gnome-user-docs`` (``gnome-help/figures/*.webm``), ``gnome-mahjongg`` (``figures/*.ogv``) and
``gnome-devel-docs`` (``gnome-devel-demos/media/*.ogv``); their help is CC-BY-SA-3.0. A page references a
video with ``<media type="video" src="...">``; the caption is that element's text (its TTML subtitles, in
the page's language), else the title of the section around it, else the page's title. A video no page
references (a ``<media>`` commented out) takes the title and ``<desc>`` of the page named like it. A
translation's video is a symlink to the ``C`` one: one sample per (language, video) with the caption in
that language and the same bytes, exact duplicates kept on purpose for the dedup stages.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import lxml.etree as etree

from fm_assets.sample_data.debian import iter_deb_files, lang_from_path
from fm_assets.sample_data.media_sample import MediaSample, sample_key

log = logging.getLogger(__name__)

PACKAGES = {  # package -> its help document folders holding videos
    "gnome-user-docs": ("gnome-help",),
    "gnome-mahjongg": ("gnome-mahjongg",),
    "gnome-devel-docs": ("gnome-devel-demos",),
}
LICENSE = "CC-BY-SA-3.0"
HELP_ROOT = "/usr/share/help/"
VIDEO_SUFFIXES = (".webm", ".ogv", ".mp4")
_MALLARD = "{http://projectmallard.org/1.0/}"
_WS = re.compile(r"\s+")


def _clean(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _wanted(package: str) -> Callable[[str], bool]:
    documents = PACKAGES[package]

    def wanted(path: str) -> bool:
        parts = path[len(HELP_ROOT) :].split("/") if path.startswith(HELP_ROOT) else []
        if len(parts) < 3 or parts[1] not in documents:
            return False
        return path.endswith(".page") or path.lower().endswith(VIDEO_SUFFIXES)

    return wanted


def _title(element: etree._Element) -> str:
    title = element.find(f"{_MALLARD}title")
    return _clean("".join(title.itertext())) if title is not None else ""


def video_references(page_path: str, xml: bytes) -> Iterator[tuple[str, str]]:
    """(video path inside the package, caption) for each video ``<media>`` of one Mallard page."""
    try:
        root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        log.warning("skipping unparsable %s (%s)", page_path, exc)
        return
    for media in root.iter(f"{_MALLARD}media"):
        src = media.get("src") or ""
        if media.get("type") != "video" or not src.lower().endswith(VIDEO_SUFFIXES) or "://" in src:
            continue
        path = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), src))
        caption = _clean(" ".join(media.itertext()))
        if not caption:
            section = next(iter(media.iterancestors(f"{_MALLARD}section")), None)
            caption = _title(section) if section is not None else ""
        yield path, caption or _title(root)


def page_description(xml: bytes) -> str:
    """A page's title and ``<desc>``, for a video named like the page that no page references."""
    try:
        root = etree.fromstring(xml, parser=etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError:
        return ""
    info = root.find(f"{_MALLARD}info")
    desc = info.find(f"{_MALLARD}desc") if info is not None else None
    parts = [_title(root), _clean("".join(desc.itertext())) if desc is not None else ""]
    return ". ".join(p.rstrip(".") for p in parts if p) + "." if any(parts) else ""


def _bytes(videos: dict[str, bytes], path: str) -> bytes | None:
    """A video's bytes; a translation's figure is a symlink to the ``C`` one, which the package holds."""
    if path in videos:
        return videos[path]
    parts = path[len(HELP_ROOT) :].split("/", 1)
    return videos.get(f"{HELP_ROOT}C/{parts[1]}") if len(parts) == 2 else None


def gnome_video_samples(deb: Path, package: str, package_version: str) -> Iterator[MediaSample]:
    """One sample per (language, video) with a caption, in sorted key order."""
    pages: dict[str, bytes] = {}
    videos: dict[str, bytes] = {}
    for path, data in iter_deb_files(deb, _wanted(package), hard_links=True):
        (pages if path.endswith(".page") else videos)[path] = data
    captions: dict[str, tuple[str, str]] = {}  # video path -> (caption, page)
    for page in sorted(pages):
        for path, caption in video_references(page, pages[page]):
            if _bytes(videos, path) is not None and caption:
                captions.setdefault(path, (caption, page))
    for video in videos:  # the C originals; each translation of a page named like the video
        _locale, document, rest = video[len(HELP_ROOT) :].split("/", 2)
        stem = posixpath.splitext(posixpath.basename(video))[0]
        for page in sorted(pages):
            page_locale, page_document, name = page[len(HELP_ROOT) :].split("/", 2)
            path = f"{HELP_ROOT}{page_locale}/{document}/{rest}"
            if page_document != document or name != f"{stem}.page" or path in captions:
                continue
            text = page_description(pages[page])
            if text:
                captions[path] = (text, page)
    for path in sorted(captions):
        caption, page = captions[path]
        locale, document = path[len(HELP_ROOT) :].split("/")[:2]
        stem, ext = posixpath.splitext(posixpath.basename(path))
        yield MediaSample(
            key=sample_key(locale, document, stem),
            ext=ext.lstrip(".").lower(),
            media=_bytes(videos, path) or b"",
            text=caption,
            meta={
                "license": LICENSE,
                "source_package": package,
                "package_version": package_version,
                "original_path": path,
                "page": page,
                "lang": lang_from_path(path),
            },
        )
