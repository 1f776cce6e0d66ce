"""Read one line-aligned byte range of a plain JSON-lines file as the whole file would.

The ranges come from a line index (``engine.line_index``: taken by ``fm land``, or by land's plan when a
manifest has none). ``iter_jsonl_range`` reads ``[start, end)`` through the same ``iter_lines``/
``record_from_line`` as ``iter_jsonl``, numbering lines and offsets from the range's place in the file, so the
union of the ranges' records and rejects is the whole-file read, in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO

from fm_assets.engine.line_index import LineRange, LineSpan, open_span, opened

from .jsonl import iter_jsonl_lines
from .types import RawRecord, RawReject


def iter_jsonl_range(
    source: Path | IO[bytes], span: LineRange | LineSpan, *, max_record_bytes: int, text_field: str
) -> Iterator[RawRecord | RawReject]:
    """The records and rejects of the plain JSONL file (a path or an open binary file) whose lines lie in
    ``span``: record indices and byte offsets are the file's own. Never ``empty_file`` (that is decided for the
    whole file)."""
    with opened(source) as raw:
        yield from iter_jsonl_lines(
            open_span(raw, span.start, span.end),
            max_record_bytes=max_record_bytes,
            text_field=text_field,
            first_line=span.first_line,
            first_offset=span.start,
        )
