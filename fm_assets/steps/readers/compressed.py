"""Bounded-memory decoded byte streams over plain, gzip and zstd files.

Every codec failure surfaces as ``ArchiveError`` carrying a reject reason, so callers can keep the
records decoded before the break. python-zstandard's stream reader ends silently on a truncated
frame, so zstd files are first checked by walking their frame and block headers (a few bytes per
128 KiB block, no decompression) and the decoded stream raises at its end if that walk failed or
the decoder stopped before the last compressed byte.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Protocol

import zstandard

from .detect import JSONL, JSONL_GZ, JSONL_ZST
from .types import CORRUPT_FILE, TRUNCATED_ARCHIVE

READ_CHUNK = 1 << 20


class ArchiveError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ByteStream(Protocol):
    def read(self, size: int) -> bytes: ...


class _GzipStream:
    def __init__(self, fileobj: BinaryIO) -> None:
        self._gz = gzip.GzipFile(fileobj=fileobj, mode="rb")

    def read(self, size: int) -> bytes:
        try:
            # read1 returns what one decode step produced, so a truncation loses no decoded bytes.
            return self._gz.read1(size)
        except EOFError as exc:
            raise ArchiveError(TRUNCATED_ARCHIVE, f"gzip stream ends early: {exc}") from exc
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise ArchiveError(CORRUPT_FILE, f"gzip stream is corrupt: {exc}") from exc


class _CountingReader:
    """Passes reads through and counts the compressed bytes handed to the decoder."""

    def __init__(self, fileobj: BinaryIO) -> None:
        self._fileobj = fileobj
        self.consumed = 0

    def read(self, size: int = -1) -> bytes:
        data = self._fileobj.read(size)
        self.consumed += len(data)
        return data


class _ZstdStream:
    def __init__(self, fileobj: BinaryIO, compressed_size: int) -> None:
        self._problem = zstd_frames_problem(fileobj)
        fileobj.seek(0)
        self._source = _CountingReader(fileobj)
        self._compressed_size = compressed_size
        self._reader = zstandard.ZstdDecompressor().stream_reader(self._source, read_across_frames=True)

    def read(self, size: int) -> bytes:
        try:
            data = self._reader.read(size)
        except zstandard.ZstdError as exc:
            raise ArchiveError(CORRUPT_FILE, f"zstd stream is corrupt: {exc}") from exc
        if data:
            return data
        if self._problem is not None:
            reason, message = self._problem
            raise ArchiveError(reason, message)
        if self._source.consumed < self._compressed_size:
            raise ArchiveError(
                CORRUPT_FILE,
                f"zstd decoder stopped at compressed byte {self._source.consumed} of {self._compressed_size}",
            )
        return b""


_ZSTD_FRAME_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_BLOCK_RAW, _BLOCK_RLE, _BLOCK_COMPRESSED = 0, 1, 2


def zstd_frames_problem(fileobj: BinaryIO) -> tuple[str, str] | None:
    """Walk zstd frame/block headers (RFC 8878); return (reason, message) if the file is cut or malformed."""
    fileobj.seek(0, os.SEEK_END)
    end = fileobj.tell()
    pos = 0
    fileobj.seek(0)

    def need(count: int, what: str) -> bytes:
        data = fileobj.read(count)
        if len(data) < count:
            raise ArchiveError(TRUNCATED_ARCHIVE, f"zstd file ends inside {what} at byte {pos} of {end}")
        return data

    try:
        while pos < end:
            magic = int.from_bytes(need(4, "a frame magic number"), "little")
            if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
                skip = int.from_bytes(need(4, "a skippable frame header"), "little")
                pos += 8 + skip
                if pos > end:
                    raise ArchiveError(
                        TRUNCATED_ARCHIVE, f"zstd skippable frame runs past the end ({end} bytes)"
                    )
                fileobj.seek(pos)
                continue
            if magic != _ZSTD_FRAME_MAGIC:
                raise ArchiveError(CORRUPT_FILE, f"no zstd frame magic at byte {pos} (found {magic:#010x})")
            descriptor = need(1, "a frame header")[0]
            single_segment = bool(descriptor & 0x20)
            has_checksum = bool(descriptor & 0x04)
            dict_id_size = (0, 1, 2, 4)[descriptor & 0x03]
            fcs_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
            header_rest = (0 if single_segment else 1) + dict_id_size + fcs_size
            need(header_rest, "a frame header")
            pos += 5 + header_rest
            while True:
                block_header = int.from_bytes(need(3, "a block header"), "little")
                last = block_header & 1
                block_type = (block_header >> 1) & 3
                block_size = block_header >> 3
                if block_type not in (_BLOCK_RAW, _BLOCK_RLE, _BLOCK_COMPRESSED):
                    raise ArchiveError(CORRUPT_FILE, f"reserved zstd block type at byte {pos}")
                body = 1 if block_type == _BLOCK_RLE else block_size
                pos += 3 + body
                if pos > end:
                    raise ArchiveError(
                        TRUNCATED_ARCHIVE, f"zstd block runs past the end of the file ({pos} > {end} bytes)"
                    )
                fileobj.seek(pos)
                if last:
                    break
            if has_checksum:
                need(4, "a frame checksum")
                pos += 4
    except ArchiveError as exc:
        return exc.reason, str(exc)
    return None


@contextmanager
def open_decoded(path: Path, fmt: str) -> Iterator[ByteStream]:
    """Open ``path`` and yield a stream of its decoded bytes; reads raise ArchiveError on codec failure."""
    with open(path, "rb", buffering=READ_CHUNK) as raw:
        if fmt == JSONL:
            yield raw
        elif fmt == JSONL_GZ:
            yield _GzipStream(raw)
        elif fmt == JSONL_ZST:
            yield _ZstdStream(raw, compressed_size=os.fstat(raw.fileno()).st_size)
        else:
            raise ValueError(f"{fmt!r} is not a line-oriented format")
