"""The one reproducible tar writer every shard codec uses: members grouped by sample, each sample checksummed.

No wall clock, owner or mode varies (mtime 0, uid/gid 0, mode 0644, ustar), so identical samples give
identical bytes; the 32-bit xxh3 of a sample's bytes (headers, payloads, padding) is what a shard index stores
to verify it when read.
"""

from __future__ import annotations

import io
import tarfile

import xxhash

BLOCK = 512


def tar_header(name: str, size: int) -> bytes:
    """A reproducible ustar header for a member of ``size`` bytes (mtime 0, owner 0, mode 0644)."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")


def tar_padding(n: int) -> int:
    """How many zero bytes pad a member of ``n`` bytes to the next 512-byte tar block."""
    return (-n) % BLOCK


def sample_checksum32(data: bytes | bytearray | memoryview) -> int:
    """The per-sample checksum a shard index stores (low 32 bits of xxh3-64)."""
    return xxhash.xxh3_64_intdigest(data) & 0xFFFFFFFF


class SampleTar:
    """A tar written in memory one sample at a time."""

    def __init__(self) -> None:
        self._tar = io.BytesIO()
        self._sample = bytearray()

    def tell(self) -> int:
        """Offset where the current sample starts."""
        return self._tar.tell()

    def add_member(self, name: str, payload: bytes) -> int:
        """Append a member to the current sample; returns its payload's offset in the tar."""
        self._sample.extend(tar_header(name, len(payload)))
        offset = self._tar.tell() + len(self._sample)
        self._sample.extend(payload)
        self._sample.extend(b"\0" * tar_padding(len(payload)))
        return offset

    def end_sample(self) -> tuple[int, int]:
        """Write the current sample out; returns its checksum and size in bytes."""
        checksum, size = sample_checksum32(self._sample), len(self._sample)
        self._tar.write(self._sample)
        self._sample.clear()
        return checksum, size

    def finish(self) -> bytes:
        """The whole archive, closed with its two zero blocks."""
        self._tar.write(b"\0" * (2 * BLOCK))
        return self._tar.getvalue()
