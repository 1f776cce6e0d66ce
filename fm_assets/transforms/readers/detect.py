"""Format detection from a file name and its first bytes.

For JSON-lines and Parquet names the magic numbers win (a ``.jsonl`` that is really gzip is read as
gzip; a ``.jsonl.gz`` holding plain JSON text is read as plain JSONL); bytes that match nothing keep
the claimed format so its reader reports the file as corrupt. A name without any extension is
identified by magic bytes alone; an unknown extension is refused. Document names (.txt/.md/.html) keep
their format whatever the bytes: binary content then surfaces as an ``invalid_utf8`` reject.
"""

from __future__ import annotations

import logging
from pathlib import PurePath

from .types import UnsupportedFormat

log = logging.getLogger(__name__)

JSONL = "jsonl"
JSONL_GZ = "jsonl.gz"
JSONL_ZST = "jsonl.zst"
PARQUET = "parquet"
TEXT = "text"
MARKDOWN = "markdown"
HTML = "html"
FORMATS = (JSONL, JSONL_GZ, JSONL_ZST, PARQUET, TEXT, MARKDOWN, HTML)

HEAD_BYTES = 64  # enough for every magic number checked here

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
PARQUET_MAGIC = b"PAR1"

_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
_COMPRESSED_SUFFIXES = {".gz": JSONL_GZ, ".gzip": JSONL_GZ, ".zst": JSONL_ZST, ".zstd": JSONL_ZST}
_SINGLE_SUFFIXES = {
    ".parquet": PARQUET,
    ".pq": PARQUET,
    ".txt": TEXT,
    ".text": TEXT,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": HTML,
}


def _format_from_magic(head: bytes) -> str | None:
    if head.startswith(GZIP_MAGIC):
        return JSONL_GZ
    if head.startswith(ZSTD_MAGIC):
        return JSONL_ZST
    if head.startswith(PARQUET_MAGIC):
        return PARQUET
    return None


def _looks_like_json_text(head: bytes) -> bool:
    stripped = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    return stripped[:1] in (b"{", b"[")


def _format_from_name(name: str) -> str | None:
    lower = name.lower()
    for suffix, fmt in _COMPRESSED_SUFFIXES.items():
        if lower.endswith(suffix):
            return fmt if lower.removesuffix(suffix).endswith(_JSONL_SUFFIXES) else None
    if lower.endswith(_JSONL_SUFFIXES):
        return JSONL
    for suffix, fmt in _SINGLE_SUFFIXES.items():
        if lower.endswith(suffix):
            return fmt
    return None


def detect_format(name: str, head: bytes) -> str:
    """Return one of FORMATS for a file called ``name`` whose first bytes are ``head``.

    Raises UnsupportedFormat when neither the name nor the magic bytes identify a known format.
    """
    by_name = _format_from_name(name)
    by_magic = _format_from_magic(head)
    # An unknown extension (".tar.gz", ".csv") is refused; only extension-less names go by magic alone.
    trust_magic = by_name in (JSONL, JSONL_GZ, JSONL_ZST, PARQUET) or (
        by_name is None and not PurePath(name).suffix
    )
    if by_magic is not None and trust_magic:
        if by_name not in (None, by_magic):
            log.warning(
                "%s: name says %s but the bytes are %s; reading as %s", name, by_name, by_magic, by_magic
            )
        return by_magic
    if by_name in (JSONL_GZ, JSONL_ZST) and head and _looks_like_json_text(head):
        log.warning("%s: named %s but holds plain JSON text; reading as jsonl", name, by_name)
        return JSONL
    if by_name is not None:
        return by_name
    raise UnsupportedFormat(
        f"cannot tell the format of {name!r}: expected one of the extensions "
        ".jsonl/.ndjson/.json (optionally .gz or .zst), .parquet, .txt, .md, .html/.htm, "
        f"or gzip/zstd/Parquet magic bytes; first bytes were {head[:8]!r}"
    )
