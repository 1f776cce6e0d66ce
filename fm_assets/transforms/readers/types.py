"""What a reader yields: a parsed raw record, or a reject that says why a record could not be read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RAW_PREFIX_BYTES = 4096

# Reject reasons (stable names: rejects tables and audit reports key on them).
INVALID_UTF8 = "invalid_utf8"
MALFORMED_JSON = "malformed_json"
WRONG_SCHEMA = "wrong_schema"
MISSING_TEXT = "missing_text"
TRUNCATED_ARCHIVE = "truncated_archive"
EMPTY_FILE = "empty_file"
RECORD_TOO_LARGE = "record_too_large"
CORRUPT_FILE = "corrupt_file"
UNSUPPORTED_FORMAT = "unsupported_format"
ARCHIVE_BOMB = "archive_bomb"  # decodes past the size or compression-ratio cap (bounded.py)

REJECT_REASONS = frozenset(
    {
        INVALID_UTF8,
        MALFORMED_JSON,
        WRONG_SCHEMA,
        MISSING_TEXT,
        TRUNCATED_ARCHIVE,
        EMPTY_FILE,
        RECORD_TOO_LARGE,
        CORRUPT_FILE,
        UNSUPPORTED_FORMAT,
        ARCHIVE_BOMB,
    }
)


class UnsupportedFormat(ValueError):
    """The file's name and leading bytes match none of the formats the readers understand."""


@dataclass(slots=True)
class RawRecord:
    record_index: int  # stable record number in the file (JSONL: line number, bad lines included)
    text: str | None
    url: str | None
    meta: dict[str, Any] = field(default_factory=dict)  # every other field of the raw record


@dataclass(slots=True)
class RawReject:
    record_index: int
    reason: str
    details: dict[str, Any]
    raw_prefix: str  # up to RAW_PREFIX_BYTES of the raw bytes, decoded with errors="replace"


def raw_prefix(data: bytes | bytearray | memoryview) -> str:
    return bytes(data[:RAW_PREFIX_BYTES]).decode("utf-8", errors="replace")


def reject(
    record_index: int, reason: str, raw: bytes | bytearray | memoryview = b"", **details: Any
) -> RawReject:
    return RawReject(record_index=record_index, reason=reason, details=details, raw_prefix=raw_prefix(raw))
