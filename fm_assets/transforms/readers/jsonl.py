"""JSON-lines readers (plain, gzip, zstd): one record per line, record_index = line number.

Blank lines carry no record: they are skipped but still advance the line number, so indices keep
pointing at the raw line. A file with no non-blank line is rejected as ``empty_file``.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compressed import ByteStream, open_decoded
from .lines import Line, OversizedLine, StreamBreak, iter_lines
from .types import (
    EMPTY_FILE,
    INVALID_UTF8,
    MALFORMED_JSON,
    MISSING_TEXT,
    RECORD_TOO_LARGE,
    WRONG_SCHEMA,
    RawRecord,
    RawReject,
    reject,
)

BOM = b"\xef\xbb\xbf"
_JSON_TYPE_NAMES = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _encodable(value: str) -> bool:
    """False for strings holding lone surrogates (valid JSON escapes like "\\ud800", invalid UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def record_from_fields(
    index: int, fields: dict[str, Any], raw: bytes, text_field: str, location: dict[str, Any]
) -> RawRecord | RawReject:
    """Build a RawRecord from one parsed object, or reject it for a missing/unusable text field."""
    if text_field not in fields:
        return reject(index, MISSING_TEXT, raw, why="absent", field=text_field, **location)
    text = fields.pop(text_field)
    if not isinstance(text, str):
        return reject(
            index, MISSING_TEXT, raw, why="not_a_string", field=text_field,
            json_type=_JSON_TYPE_NAMES.get(type(text), type(text).__name__), **location,
        )  # fmt: skip
    if not text.strip():
        return reject(index, MISSING_TEXT, raw, why="empty", field=text_field, **location)
    if not _encodable(text):
        return reject(index, INVALID_UTF8, raw, why="lone_surrogate_escape", field=text_field, **location)
    url = fields.get("url")
    if isinstance(url, str) and _encodable(url):
        del fields["url"]
    else:
        url = None
    return RawRecord(record_index=index, text=text, url=url, meta=fields)


def record_from_line(line: Line, text_field: str) -> RawRecord | RawReject | None:
    """Parse one JSON line; None for a blank line."""
    data = line.data.removesuffix(b"\r")
    if line.index == 0:
        data = data.removeprefix(BOM)
    if not data.strip():
        return None
    location = {"byte_offset": line.offset}
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return reject(line.index, INVALID_UTF8, data, error=exc.reason, bad_byte_at=exc.start, **location)
    try:
        value = json.loads(decoded)
    except RecursionError:
        return reject(line.index, MALFORMED_JSON, data, error="nesting too deep", **location)
    except json.JSONDecodeError as exc:
        return reject(line.index, MALFORMED_JSON, data, error=exc.msg, char_at=exc.pos, **location)
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        return reject(line.index, MALFORMED_JSON, data, error=str(exc), **location)
    if not isinstance(value, dict):
        return reject(
            line.index, WRONG_SCHEMA, data, error="line is not a JSON object",
            json_type=_JSON_TYPE_NAMES.get(type(value), type(value).__name__), **location,
        )  # fmt: skip
    return record_from_fields(line.index, value, data, text_field, location)


@dataclass(slots=True)
class LinesSeen:
    """What ``iter_jsonl_lines`` read: lines (blank ones included), blank lines, and decoded bytes."""

    lines: int = 0
    blank: int = 0
    decoded_bytes: int = 0


def iter_jsonl_lines(
    stream: ByteStream,
    *,
    max_record_bytes: int,
    text_field: str,
    first_line: int = 0,
    first_offset: int = 0,
) -> Generator[RawRecord | RawReject, None, LinesSeen | None]:
    """Records and rejects of the JSON lines in ``stream``, numbered from line ``first_line`` at byte
    ``first_offset`` of the file (a line-aligned slice reads as the whole file does); returns what it saw,
    or None when the stream broke (the break is the last reject)."""
    seen = LinesSeen(decoded_bytes=first_offset)
    for item in iter_lines(stream, max_record_bytes, first_index=first_line, first_offset=first_offset):
        if isinstance(item, Line):
            seen.lines += 1
            seen.decoded_bytes = item.offset + len(item.data)
            result = record_from_line(item, text_field)
            if result is None:
                seen.blank += 1
            else:
                yield result
        elif isinstance(item, OversizedLine):
            seen.lines += 1
            seen.decoded_bytes = item.offset + item.size
            yield reject(
                item.index, RECORD_TOO_LARGE, item.prefix,
                size_bytes=item.size, max_record_bytes=max_record_bytes, byte_offset=item.offset,
            )  # fmt: skip
        elif isinstance(item, StreamBreak):
            yield reject(
                item.index, item.error.reason, item.partial,
                error=str(item.error), byte_offset=item.offset, partial_line_bytes=item.partial_size,
                lines_before_break=item.index,
            )  # fmt: skip
            return None
    return seen


def iter_jsonl(
    path: Path, fmt: str, *, max_record_bytes: int, text_field: str
) -> Iterator[RawRecord | RawReject]:
    with open_decoded(path, fmt) as stream:
        seen = yield from iter_jsonl_lines(stream, max_record_bytes=max_record_bytes, text_field=text_field)
    if seen is not None and seen.lines == seen.blank:
        yield reject(0, EMPTY_FILE, b"", decoded_bytes=seen.decoded_bytes, blank_lines=seen.blank, format=fmt)
