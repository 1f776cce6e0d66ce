"""The sample index of a media shard (``.idx``): its record layout, writer and verified reader.

Header (magic, version, flags, samples, key bytes), one :data:`MEDIA_INDEX_DTYPE` record per sample, ``n + 1``
key offsets, the keys, and an xxh3-64 footer over everything before it. :mod:`fm_loader.media.format`
re-exports every name.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import xxhash

MEDIA_FORMAT_VERSION = 1
MEDIA_INDEX_MAGIC = b"FMMEDIX1"
_INDEX_HEADER = struct.Struct("<8sIIQQ")  # magic, version, flags, samples, key bytes
MEDIA_INDEX_DTYPE = np.dtype(
    [
        ("sample_offset", "<u8"),  # first byte of the sample's first tar header
        ("sample_size", "<u8"),  # bytes of all three members with headers and padding
        ("media_offset", "<u8"),
        ("media_size", "<u8"),
        ("text_offset", "<u8"),
        ("meta_offset", "<u8"),
        ("frames", "<u8"),  # audio frames per channel (0 for images)
        ("text_size", "<u4"),
        ("meta_size", "<u4"),
        (
            "checksum",
            "<u4",
        ),  # xxh3-64 & 0xffffffff of the sample's bytes (fm_loader.format.sample_checksum32)
        ("width", "<u4"),
        ("height", "<u4"),
        ("sample_rate", "<u4"),
        ("channels", "<u2"),
        ("caption_tokens", "<u2"),  # number of caption token ids in the .json (0: none)
        ("media_kind", "u1"),  # index into MEDIA_EXTS
        ("reserved", "V7"),
    ]
)


def encode_media_index(records: np.ndarray, keys: list[bytes]) -> bytes:
    """The ``.idx`` bytes: header, records, key offsets (uint64, n + 1) and key bytes, xxh3-64 footer."""
    offsets = np.zeros(len(keys) + 1, dtype="<u8")
    np.cumsum([len(k) for k in keys], out=offsets[1:])
    key_blob = b"".join(keys)
    header = _INDEX_HEADER.pack(MEDIA_INDEX_MAGIC, MEDIA_FORMAT_VERSION, 0, len(records), len(key_blob))
    body = header + records.astype(MEDIA_INDEX_DTYPE).tobytes() + offsets.tobytes() + key_blob
    return body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body))


class CorruptMediaIndexError(ValueError):
    """A sample index does not match its own footer checksum or layout."""


@dataclass(frozen=True)
class MediaIndex:
    """A decoded ``.idx`` file.

    Attributes:
        records: One :data:`MEDIA_INDEX_DTYPE` record per sample (read-only view of the file).
        key_offsets: ``n + 1`` byte offsets of the keys in ``key_blob``.
        key_blob: The keys, concatenated UTF-8.
    """

    records: np.ndarray
    key_offsets: np.ndarray
    key_blob: bytes

    @property
    def samples(self) -> int:
        return len(self.records)

    def key(self, sample: int) -> str:
        """The key of sample ``sample`` (without the shard-name prefix of its tar members)."""
        lo, hi = int(self.key_offsets[sample]), int(self.key_offsets[sample + 1])
        return self.key_blob[lo:hi].decode()


def decode_media_index(data: bytes | memoryview, source: str = "<index>") -> MediaIndex:
    """Parse and verify an ``.idx`` file written by :func:`encode_media_shard`.

    Raises:
        CorruptMediaIndexError: The footer checksum, magic, version or sizes do not match.
    """
    buf = memoryview(data)
    if len(buf) < _INDEX_HEADER.size + 8:
        raise CorruptMediaIndexError(f"{source}: sample index too short ({len(buf)} bytes)")
    (footer,) = struct.unpack("<Q", buf[-8:])
    if xxhash.xxh3_64_intdigest(buf[:-8]) != footer:
        raise CorruptMediaIndexError(
            f"{source}: sample index checksum mismatch; re-shard or restore the file"
        )
    magic, version, _flags, n, key_bytes = _INDEX_HEADER.unpack_from(buf, 0)
    if magic != MEDIA_INDEX_MAGIC:
        raise CorruptMediaIndexError(f"{source}: not an fm_loader media index (magic={magic!r})")
    if version != MEDIA_FORMAT_VERSION:
        raise CorruptMediaIndexError(
            f"{source}: media index format version {version}; this fm_loader reads {MEDIA_FORMAT_VERSION}"
        )
    start = _INDEX_HEADER.size
    end = start + n * MEDIA_INDEX_DTYPE.itemsize
    offsets_end = end + (n + 1) * 8
    if offsets_end + key_bytes + 8 != len(buf):
        raise CorruptMediaIndexError(f"{source}: sample index size does not match its header")
    records = np.frombuffer(buf[start:end], dtype=MEDIA_INDEX_DTYPE)
    offsets = np.frombuffer(buf[end:offsets_end], dtype="<u8")
    return MediaIndex(records, offsets, bytes(buf[offsets_end : offsets_end + key_bytes]))
