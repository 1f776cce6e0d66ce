"""Single-document files (.txt, .md, .html): the whole file is one record with record_index 0.

The file is read only when it fits the record limit. Text and Markdown must be UTF-8. HTML is
decoded as UTF-8 unless its first bytes declare another charset, which is then honoured; bytes
invalid in the effective encoding reject the file as ``invalid_utf8``.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path

from .detect import HTML, MARKDOWN
from .types import CORRUPT_FILE, INVALID_UTF8, MISSING_TEXT, RECORD_TOO_LARGE, RawRecord, RawReject, reject

_BOM = b"\xef\xbb\xbf"
_DECLARED_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _declared_charset(head: bytes) -> str | None:
    match = _DECLARED_CHARSET.search(head)
    if not match:
        return None
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name
    except LookupError:
        return None


def _read_limited(path: Path, max_record_bytes: int) -> tuple[bytes, int]:
    """Return (content, size) where content is empty when the file exceeds the limit."""
    with open(path, "rb") as fh:
        data = fh.read(max_record_bytes + 1)
        if len(data) <= max_record_bytes:
            return data, len(data)
        fh.seek(0, 2)
        return data[:4096], fh.tell()


def iter_document(path: Path, fmt: str, *, max_record_bytes: int) -> Iterator[RawRecord | RawReject]:
    data, size = _read_limited(path, max_record_bytes)
    if size > max_record_bytes:
        yield reject(
            0, RECORD_TOO_LARGE, data, size_bytes=size, max_record_bytes=max_record_bytes, format=fmt
        )
        return
    data = data.removeprefix(_BOM)
    encoding = "utf-8"
    if fmt == HTML:
        encoding = _declared_charset(data[:2048]) or "utf-8"
    try:
        decoded = data.decode(encoding)
    except UnicodeDecodeError as exc:
        yield reject(
            0, INVALID_UTF8, data, error=exc.reason, bad_byte_at=exc.start, encoding=encoding, format=fmt
        )
        return
    if not decoded.strip():
        yield reject(0, MISSING_TEXT, data, why="empty", format=fmt)
        return
    meta: dict[str, str] = {"source_file": path.name}
    url = None
    if fmt == HTML:
        # lxml only where a page is parsed: a driver that imports the readers never loads it (land names this
        # module in its worker_modules, so the unit workers start with it)
        import lxml.etree

        from .html_text import extract_html_text

        try:
            # Re-encoded as UTF-8 so libxml2 never has to know the declared charset's name.
            extracted = extract_html_text(data if encoding == "utf-8" else decoded.encode("utf-8"))
        except (lxml.etree.LxmlError, ValueError, LookupError) as exc:
            yield reject(0, CORRUPT_FILE, data, error=str(exc), format=fmt)
            return
        text, url = extracted.text, extracted.canonical_url
        if extracted.title:
            meta["title"] = extracted.title
    else:
        text = decoded.replace("\r\n", "\n")
        if fmt == MARKDOWN and (heading := _ATX_HEADING.search(text)):
            meta["title"] = heading.group(1)
    if not text.strip():
        yield reject(0, MISSING_TEXT, data, why="empty", format=fmt)
        return
    yield RawRecord(record_index=0, text=text, url=url, meta=meta)
