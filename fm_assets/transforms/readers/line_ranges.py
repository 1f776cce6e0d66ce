"""Cut a plain JSON-lines file into line-aligned byte ranges, and read one range as the whole file would.

``scan_line_ranges`` makes one bounded-memory pass over the file: its sha256, ``pieces - 1`` cut points
(the first byte after the first ``\\n`` at or past ``k * size / pieces``), each range's first line number
(the ``\\n`` bytes before it), each range's own sha256, and whether the file has any non-whitespace byte
(a file of blank lines must stay whole: its one ``empty_file`` reject is a whole-file fact). No JSON is
parsed. ``iter_jsonl_range`` reads ``[start, end)`` through the same ``iter_lines``/``record_from_line``
as ``iter_jsonl``, numbering lines and offsets from the range's place in the file, so the union of the
ranges' records and rejects is the whole-file read, in order.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .compressed import READ_CHUNK, ByteStream
from .jsonl import BOM, iter_jsonl_lines
from .types import RawRecord, RawReject

_NOT_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")  # what bytes.strip() keeps: a line with one is not blank


@dataclass(frozen=True)
class LineRange:
    """Bytes ``[start, end)`` of a file, starting at a line start; ``first_line`` is that line's number."""

    start: int
    end: int
    first_line: int
    sha256: str  # of the range's bytes, taken from the same read as the whole file's sha256


@dataclass(frozen=True)
class LineScan:
    sha256: str  # of the whole file
    size: int
    has_content: bool  # some byte (a leading BOM aside) is not ASCII whitespace
    ranges: tuple[LineRange, ...]


class _HashThread:
    """sha256 digests of a stream of buffers, computed on a thread of its own (hashlib releases the GIL on
    large buffers): ``feed`` a buffer, ``cut`` to end the current digest. Buffers are taken in order, at most
    ``backlog`` of them waiting, so a reader faster than the hash holds a bounded amount of the file."""

    def __init__(self, backlog: int = 8) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="line-ranges-hash")
        self._pending: deque[Future[None]] = deque()
        self._backlog = backlog
        self._digest = hashlib.sha256()
        self.digests: list[str] = []

    def _submit(self, fn: Callable[[], None]) -> None:
        while len(self._pending) >= self._backlog:
            self._pending.popleft().result()
        self._pending.append(self._pool.submit(fn))

    def feed(self, data: memoryview) -> None:
        if len(data):
            self._submit(lambda: self._digest.update(data))

    def cut(self) -> None:
        def finish() -> None:
            self.digests.append(self._digest.hexdigest())
            self._digest = hashlib.sha256()

        self._submit(finish)

    def close(self) -> list[str]:
        """The digests cut so far, once every buffer fed is hashed."""
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._pool.shutdown()
        return self.digests


def scan_line_ranges(stream: ByteStream, size: int, pieces: int, chunk_size: int = READ_CHUNK) -> LineScan:
    """Read ``stream`` (``size`` bytes expected) once and cut it into at most ``pieces`` line-aligned ranges.

    A line longer than a piece absorbs the cut points it spans, so there may be fewer ranges; the last
    range ends at the end of the stream, with or without a final newline. The whole file's sha256 and the
    ranges' are computed on two threads beside the one that reads and finds the cuts (on a 100 MB file the
    three passes took 0.165 s one after the other)."""
    targets = deque(size * k // pieces for k in range(1, pieces))
    whole, parts = _HashThread(), _HashThread()
    cuts: list[tuple[int, int, int]] = []  # (start, end, first line) of each range
    start = first_line = 0
    position = lines = 0
    has_content = False
    try:
        while chunk := stream.read(chunk_size):
            view = memoryview(chunk)
            whole.feed(view)
            if not has_content:
                body = chunk.removeprefix(BOM) if position == 0 else chunk
                has_content = _NOT_BLANK.search(body) is not None
            fed = 0  # bytes of this chunk already fed to the ranges' hash
            while targets and targets[0] < position + len(chunk):
                newline = chunk.find(b"\n", max(targets[0] - position, fed))
                if newline < 0:
                    break  # the line crossing the target ends in a later chunk
                cut = position + newline + 1
                while targets and targets[0] < cut:  # a long line absorbs every target it spans
                    targets.popleft()
                parts.feed(view[fed : newline + 1])
                parts.cut()
                cuts.append((start, cut, first_line))
                start, first_line, fed = cut, lines + chunk.count(b"\n", 0, newline + 1), newline + 1
            parts.feed(view[fed:])
            lines += chunk.count(b"\n")
            position += len(chunk)
        if position > start or not cuts:
            parts.cut()
            cuts.append((start, position, first_line))
    finally:
        whole.cut()
        digests, (sha256,) = parts.close(), whole.close()
    ranges = tuple(LineRange(a, b, line, digest) for (a, b, line), digest in zip(cuts, digests, strict=True))
    return LineScan(sha256, position, has_content, ranges)


class _Slice:
    """The next ``length`` bytes of an open file, as a ByteStream."""

    def __init__(self, raw: ByteStream, length: int) -> None:
        self._raw = raw
        self._left = length

    def read(self, size: int) -> bytes:
        data = self._raw.read(min(size, self._left))
        self._left -= len(data)
        return data


def range_sha256(path: Path, span: LineRange) -> str:
    """sha256 of the range's bytes as they are now."""
    digest = hashlib.sha256()
    with open(path, "rb") as raw:
        raw.seek(span.start)
        stream = _Slice(raw, span.end - span.start)
        while block := stream.read(READ_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def iter_jsonl_range(
    path: Path, span: LineRange, *, max_record_bytes: int, text_field: str
) -> Iterator[RawRecord | RawReject]:
    """The records and rejects of the plain JSONL file ``path`` whose lines lie in ``span``: record indices
    and byte offsets are the file's own. Never ``empty_file`` (that is decided for the whole file)."""
    with open(path, "rb", buffering=READ_CHUNK) as raw:
        raw.seek(span.start)
        stream = _Slice(raw, span.end - span.start)
        yield from iter_jsonl_lines(
            stream,
            max_record_bytes=max_record_bytes,
            text_field=text_field,
            first_line=span.first_line,
            first_offset=span.start,
        )
