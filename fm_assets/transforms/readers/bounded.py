"""Bounded decompression: every compressed input is decoded under a size cap and a compression-ratio cap.

Nothing is ever decompressed without bounds: ``GuardedReader`` sits between a decoder (gzip, bzip2, xz, zstd)
and its consumer, counts the decoded bytes against the compressed bytes the decoder pulled (``CountingReader``)
and raises ``DecompressionBombError`` (reject reason ``archive_bomb``) once the decoded total passes
``max_decoded_bytes`` or, past ``ratio_after_bytes``, the ratio passes ``max_ratio``. Each read returns at most
``READ_CHUNK`` bytes, so memory stays bounded whatever the archive claims. ``open_guarded`` picks the decoder
from the leading bytes (never from the name) and keeps a window of the decoded tail so a caller can look at
bytes just behind what it consumed (the tar end-of-archive marker).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import zstandard

from .types import ARCHIVE_BOMB

READ_CHUNK = 1 << 20
_WINDOW = 64 << 10  # decoded bytes kept behind the read position (tarfile buffers 10 KiB ahead)


@dataclass(frozen=True)
class DecompressionLimits:
    """Caps on what one compressed input may decode to (defaults fit real media and text archives)."""

    max_decoded_bytes: int = 16 << 30
    max_ratio: float = 200.0  # decoded / compressed bytes; real text ~3-10, media ~1
    ratio_after_bytes: int = (
        256 << 20
    )  # below this, any ratio (a 100 MB line of one letter is text, not a bomb)
    max_member_bytes: int = 256 << 20  # one tar member, and one sample's members together


DEFAULT_LIMITS = DecompressionLimits()


class DecompressionBombError(Exception):
    """A compressed input that decodes past its limits; ``reason`` is the reject reason."""

    reason = ARCHIVE_BOMB


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class CountingReader:
    """Passes reads through and counts the compressed bytes handed to the decoder."""

    def __init__(self, fileobj: Readable) -> None:
        self._fileobj = fileobj
        self.consumed = 0

    def read(self, size: int = -1) -> bytes:
        data = self._fileobj.read(size)
        self.consumed += len(data)
        return data


class GuardedReader:
    """Decoded bytes of ``decoded`` under ``limits``; ``source`` counts the compressed bytes it consumed."""

    def __init__(
        self, decoded: Readable, source: CountingReader, limits: DecompressionLimits, what: str
    ) -> None:
        self._decoded = decoded
        self._source = source
        self._limits = limits
        self._what = what
        self.position = 0  # decoded bytes handed out
        self._window = bytearray()

    def read(self, size: int = -1) -> bytes:
        size = READ_CHUNK if size is None or size < 0 or size > READ_CHUNK else size
        data = self._decoded.read(size)
        self.position += len(data)
        self.check()
        self._window += data
        if len(self._window) > _WINDOW:
            del self._window[: len(self._window) - _WINDOW]
        return data

    def check(self) -> None:
        limits, decoded, compressed = self._limits, self.position, max(self._source.consumed, 1)
        if decoded > limits.max_decoded_bytes:
            raise DecompressionBombError(
                f"{self._what} decodes to more than {limits.max_decoded_bytes:,} bytes (cap); not read further"
            )
        if decoded > limits.ratio_after_bytes and decoded > limits.max_ratio * compressed:
            raise DecompressionBombError(
                f"{self._what} decodes {decoded:,} bytes from {compressed:,} compressed bytes (ratio "
                f"{decoded / compressed:,.0f} > {limits.max_ratio:g}); not read further"
            )

    def bytes_at(self, offset: int, size: int) -> bytes:
        """Decoded bytes [offset, offset + size), reading on as needed; shorter at the end of the stream, and
        only available within the window kept behind the read position."""
        while self.position < offset + size and self.read(READ_CHUNK):
            pass
        start = offset - (self.position - len(self._window))
        if start < 0:
            raise ValueError(f"decoded offset {offset} is no longer held (window of {_WINDOW} bytes)")
        return bytes(self._window[start : start + size])


def compression_of(head: bytes) -> str | None:
    """The codec a file's leading bytes announce (None: not compressed)."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    return None


def _decoder(codec: str | None, source: CountingReader) -> Readable:
    if codec == "gzip":
        return gzip.GzipFile(fileobj=source, mode="rb")  # type: ignore[arg-type]
    if codec == "bzip2":
        return bz2.BZ2File(source)  # type: ignore[arg-type]
    if codec == "xz":
        return lzma.LZMAFile(source)  # type: ignore[arg-type]
    if codec == "zstd":
        return zstandard.ZstdDecompressor().stream_reader(source, read_across_frames=True)  # type: ignore[arg-type]
    return source


@contextlib.contextmanager
def open_guarded(path: Path, limits: DecompressionLimits = DEFAULT_LIMITS) -> Iterator[GuardedReader]:
    """``path``'s decoded bytes (decoder chosen by its leading bytes; a plain file passes through) under
    ``limits``."""
    with open(path, "rb") as raw:
        codec = compression_of(raw.read(6))
        raw.seek(0)
        source = CountingReader(raw)
        yield GuardedReader(_decoder(codec, source), source, limits, f"{path.name} ({codec or 'plain'})")


CODEC_ERRORS: tuple[type[BaseException], ...] = (
    EOFError,
    OSError,
    lzma.LZMAError,
    zstandard.ZstdError,
    zlib.error,
)  # what a decoder raises on a cut or corrupt stream
