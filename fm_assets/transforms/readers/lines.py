"""Split a decoded byte stream into numbered lines in bounded memory.

A line longer than the record limit is never assembled: its first bytes are kept for the reject and
the rest is counted and discarded chunk by chunk until the next newline. If the stream breaks
(truncated or corrupt archive), the partial line read so far is reported with the break.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .compressed import READ_CHUNK, ArchiveError, ByteStream
from .types import RAW_PREFIX_BYTES


@dataclass(slots=True)
class Line:
    index: int
    offset: int  # byte offset of the line in the decoded stream
    data: bytes  # without the trailing newline


@dataclass(slots=True)
class OversizedLine:
    index: int
    offset: int
    size: int  # bytes, without the newline
    prefix: bytes


@dataclass(slots=True)
class StreamBreak:
    index: int  # index the next line would have had
    offset: int
    error: ArchiveError
    partial: bytes  # prefix of the incomplete line read before the break
    partial_size: int


def _head(pieces: list[bytes]) -> bytes:
    """The first RAW_PREFIX_BYTES of the concatenated pieces, without joining them all."""
    head = bytearray()
    for piece in pieces:
        head += piece[: RAW_PREFIX_BYTES - len(head)]
        if len(head) >= RAW_PREFIX_BYTES:
            break
    return bytes(head)


def iter_lines(
    stream: ByteStream,
    max_line_bytes: int,
    chunk_size: int = READ_CHUNK,
    *,
    first_index: int = 0,
    first_offset: int = 0,
) -> Iterator[Line | OversizedLine | StreamBreak]:
    """Lines of ``stream``; indices and offsets count from ``first_index``/``first_offset`` (where the
    stream starts in its file, for a line-aligned slice)."""
    index = first_index
    offset = first_offset  # offset of the current (pending) line
    pending: list[bytes] = []  # pieces of the current line while it still fits
    pending_size = 0
    skipping = False  # the current line is oversized: only its prefix is kept
    prefix = b""
    while True:
        try:
            chunk = stream.read(chunk_size)
        except ArchiveError as exc:
            partial = prefix if skipping else _head(pending)
            yield StreamBreak(index, offset, exc, partial, pending_size)
            return
        if not chunk:
            break
        pieces = chunk.split(b"\n")
        last = len(pieces) - 1
        for position, piece in enumerate(pieces):
            if not skipping and pending_size + len(piece) > max_line_bytes:
                skipping = True
                prefix = _head([*pending, piece])
                pending = []
            if not skipping:
                pending.append(piece)
            pending_size += len(piece)
            if position == last:
                break  # the chunk ended inside this line; the next chunk continues it
            if skipping:
                yield OversizedLine(index, offset, pending_size, prefix)
            else:
                yield Line(index, offset, pending[0] if len(pending) == 1 else b"".join(pending))
            index += 1
            offset += pending_size + 1
            pending, pending_size, skipping, prefix = [], 0, False, b""
    if skipping:
        yield OversizedLine(index, offset, pending_size, prefix)
    elif pending_size:
        yield Line(index, offset, b"".join(pending))
