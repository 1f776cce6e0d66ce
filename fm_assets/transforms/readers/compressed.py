"""Bounded-memory decoded byte streams over plain, gzip and zstd files.

Every codec failure surfaces as ``ArchiveError`` carrying a reject reason. Each archive is first
decoded once with the output discarded (bounded memory, and bounded size and ratio: a decompression bomb is
``archive_bomb`` before any record of it is read, ``bounded.py``), because corruption can decode into
plausible garbage long before the CRC/checksum check at the end notices: a corrupt archive then
fails on the first read, while a truncated one streams its records up to the cut. python-zstandard's
reader ends silently on a truncated frame, so zstd files are also checked by walking their frame and
block headers (RFC 8878), and must be decoded up to their last compressed byte.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import zstandard

from fm_assets.engine.line_index import READ_CHUNK, ByteStream

from .bounded import DEFAULT_LIMITS, CountingReader, DecompressionBombError, GuardedReader
from .detect import JSONL, JSONL_GZ, JSONL_ZST
from .types import ARCHIVE_BOMB, CORRUPT_FILE, TRUNCATED_ARCHIVE


class ArchiveError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _gzip_reader(fileobj: BinaryIO) -> gzip.GzipFile:
    return gzip.GzipFile(fileobj=fileobj, mode="rb")


def _zstd_reader(fileobj: BinaryIO) -> zstandard.ZstdDecompressionReader:
    return zstandard.ZstdDecompressor().stream_reader(fileobj, read_across_frames=True)


def _gzip_read(reader: gzip.GzipFile, size: int) -> bytes:
    try:
        # read1 returns what one decode step produced, so a truncation loses no decoded bytes.
        return reader.read1(size)
    except EOFError as exc:
        raise ArchiveError(TRUNCATED_ARCHIVE, f"gzip stream ends early: {exc}") from exc
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise ArchiveError(CORRUPT_FILE, f"gzip stream is corrupt: {exc}") from exc


def _zstd_read(reader: zstandard.ZstdDecompressionReader, size: int) -> bytes:
    try:
        return reader.read(size)
    except zstandard.ZstdError as exc:
        raise ArchiveError(CORRUPT_FILE, f"zstd stream is corrupt: {exc}") from exc


class _CheckedStream:
    """Decoded bytes of a gzip or zstd file that was verified end to end before the first read.

    A corrupt archive (bad CRC or checksum, invalid deflate data) can decode into plausible garbage
    before the codec notices, so it fails on the first read and no record of it is trusted. A merely
    truncated archive streams normally and fails where its data ends.
    """

    def __init__(self, fileobj: BinaryIO, fmt: str) -> None:
        size = os.fstat(fileobj.fileno()).st_size
        self._is_gzip = fmt == JSONL_GZ
        self._problem = _verify(fileobj, self._is_gzip, size)
        fileobj.seek(0)
        self._reader = _gzip_reader(fileobj) if self._is_gzip else _zstd_reader(fileobj)

    def read(self, size: int) -> bytes:
        if self._problem is not None and self._problem.reason in (CORRUPT_FILE, ARCHIVE_BOMB):
            raise self._problem
        data = _gzip_read(self._reader, size) if self._is_gzip else _zstd_read(self._reader, size)
        if not data and self._problem is not None:
            raise self._problem  # zstd's reader ends quietly on a cut frame
        return data


def _verify(fileobj: BinaryIO, is_gzip: bool, compressed_size: int) -> ArchiveError | None:
    """Decode the whole file once, discarding output; return the first problem found."""
    if not is_gzip:
        problem = zstd_frames_problem(fileobj)
        if problem is not None:
            return ArchiveError(*problem)
        fileobj.seek(0)
    source = CountingReader(fileobj)
    reader = _gzip_reader(source) if is_gzip else _zstd_reader(source)  # type: ignore[arg-type]
    guard = GuardedReader(reader, source, DEFAULT_LIMITS, "gzip file" if is_gzip else "zstd file")
    decoded = 0
    try:
        while chunk := (_gzip_read(reader, READ_CHUNK) if is_gzip else _zstd_read(reader, READ_CHUNK)):
            decoded += len(chunk)
            guard.position = decoded
            guard.check()  # a bomb stops here, before a record of it is read
    except DecompressionBombError as exc:
        return ArchiveError(ARCHIVE_BOMB, str(exc))
    except ArchiveError as exc:
        exc.args = (f"{exc.args[0]} (after {decoded} decoded bytes)",)
        return exc
    if not is_gzip and source.consumed < compressed_size:
        return ArchiveError(
            CORRUPT_FILE, f"zstd decoder stopped at compressed byte {source.consumed} of {compressed_size}"
        )
    return None


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
        elif fmt in (JSONL_GZ, JSONL_ZST):
            yield _CheckedStream(raw, fmt)
        else:
            raise ValueError(f"{fmt!r} is not a line-oriented format")
