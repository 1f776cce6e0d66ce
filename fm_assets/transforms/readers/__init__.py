"""Streaming readers for landed raw files: every record comes out as a RawRecord or a RawReject.

``iter_raw_records`` never raises for bad content (invalid UTF-8, malformed or truncated input,
oversized records, unknown formats): each case is a RawReject with a reason from REJECT_REASONS,
and records before a break are still yielded. It does raise for infrastructure errors (the file
is missing or unreadable), which must fail the work unit rather than quarantine data.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from .detect import (
    FORMATS,
    HEAD_BYTES,
    HTML,
    JSONL,
    JSONL_GZ,
    JSONL_ZST,
    MARKDOWN,
    PARQUET,
    TEXT,
    detect_format,
)
from .documents import iter_document
from .jsonl import iter_jsonl
from .parquet import iter_parquet
from .types import (
    CORRUPT_FILE,
    EMPTY_FILE,
    INVALID_UTF8,
    MALFORMED_JSON,
    MISSING_TEXT,
    RAW_PREFIX_BYTES,
    RECORD_TOO_LARGE,
    REJECT_REASONS,
    TRUNCATED_ARCHIVE,
    UNSUPPORTED_FORMAT,
    WRONG_SCHEMA,
    RawRecord,
    RawReject,
    UnsupportedFormat,
    reject,
)

__all__ = [
    "CORRUPT_FILE",
    "DEFAULT_MAX_RECORD_BYTES",
    "EMPTY_FILE",
    "FORMATS",
    "INVALID_UTF8",
    "MALFORMED_JSON",
    "MISSING_TEXT",
    "RECORD_TOO_LARGE",
    "REJECT_REASONS",
    "TRUNCATED_ARCHIVE",
    "UNSUPPORTED_FORMAT",
    "WRONG_SCHEMA",
    "RawRecord",
    "RawReject",
    "UnsupportedFormat",
    "detect_format",
    "iter_raw_records",
    "read_head",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_RECORD_BYTES = 32 * 2**20


def read_head(path: str | Path, size: int = HEAD_BYTES) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(size)


def _dispatch(
    path: Path, fmt: str, max_record_bytes: int, text_field: str
) -> Iterator[RawRecord | RawReject]:
    if fmt in (JSONL, JSONL_GZ, JSONL_ZST):
        return iter_jsonl(path, fmt, max_record_bytes=max_record_bytes, text_field=text_field)
    if fmt == PARQUET:
        return iter_parquet(path, max_record_bytes=max_record_bytes, text_field=text_field)
    if fmt in (TEXT, MARKDOWN, HTML):
        return iter_document(path, fmt, max_record_bytes=max_record_bytes)
    raise UnsupportedFormat(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def iter_raw_records(
    path: str | Path,
    fmt: str | None = None,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    text_field: str = "text",
) -> Iterator[RawRecord | RawReject]:
    """Yield every record of the landed file at ``path`` in file order, as RawRecord or RawReject.

    ``fmt`` overrides detection (one of FORMATS). ``text_field`` names the text field of JSONL and
    Parquet records; single-document formats ignore it. Memory stays bounded by
    ``max_record_bytes`` plus a read chunk, whatever the file size.
    """
    path = Path(path)
    size = path.stat().st_size
    head = read_head(path, RAW_PREFIX_BYTES)
    if fmt is None:
        try:
            fmt = detect_format(path.name, head[:HEAD_BYTES])
        except UnsupportedFormat as exc:
            yield reject(0, UNSUPPORTED_FORMAT, head, error=str(exc), file_name=path.name)
            return
    if size == 0:
        yield reject(0, EMPTY_FILE, b"", decoded_bytes=0, format=fmt)
        return
    try:
        records = _dispatch(path, fmt, max_record_bytes, text_field)
    except UnsupportedFormat as exc:
        yield reject(0, UNSUPPORTED_FORMAT, head, error=str(exc), file_name=path.name)
        return
    counts: Counter[str] = Counter()
    for item in records:
        counts["records" if isinstance(item, RawRecord) else item.reason] += 1
        yield item
    log.info("read %s as %s: %s", path.name, fmt, dict(counts))
