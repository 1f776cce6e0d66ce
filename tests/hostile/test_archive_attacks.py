"""Issue 18 item 2: tars and compressed text are read under size and ratio caps, member names are checked,
links are reported, and a valid gzip-compressed tar keeps its last sample."""

from __future__ import annotations

import gzip
import io
import tarfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest
import zstandard
from media_fixtures import jpeg_image

from fm_assets.transforms.readers import iter_raw_records
from fm_assets.transforms.readers.bounded import DecompressionLimits
from fm_assets.transforms.readers.media_samples import (
    ARCHIVE_BOMB,
    LINK_MEMBER,
    MEMBER_TOO_LARGE,
    TRUNCATED_ARCHIVE,
    UNSAFE_MEMBER_NAME,
    MediaItem,
    MediaProblem,
    iter_tar_samples,
)

SMALL = DecompressionLimits(max_decoded_bytes=64 << 20, max_ratio=50, ratio_after_bytes=1 << 20,
                            max_member_bytes=8 << 20)  # fmt: skip


def _tar(members: Sequence[tarfile.TarInfo | tuple[str, bytes]], mode: str = "w") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:  # type: ignore[call-overload]
        for entry in members:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return buffer.getvalue()


def _samples(
    tmp_path: Path, data: bytes, limits: DecompressionLimits = SMALL
) -> list[MediaItem | MediaProblem]:
    path = tmp_path / "x.tar"
    path.write_bytes(data)
    return list(iter_tar_samples("x.tar", path, limits))


def _pairs(n: int) -> list[tuple[str, bytes]]:
    image = jpeg_image(16, 12)
    return [m for i in range(n) for m in ((f"{i:04d}.jpg", image), (f"{i:04d}.txt", f"caption {i}".encode()))]


@pytest.mark.parametrize("compress", [gzip.compress, lambda b: zstandard.ZstdCompressor().compress(b)])
def test_a_valid_compressed_tar_keeps_every_sample_including_the_last(tmp_path, compress):
    items = _samples(tmp_path, compress(_tar(_pairs(3))))
    assert [type(i).__name__ for i in items] == ["MediaItem"] * 3
    assert [i.text for i in items] == ["caption 0", "caption 1", "caption 2"]  # type: ignore[union-attr]


def test_a_cut_gzip_tar_is_still_truncated(tmp_path):
    data = gzip.compress(_tar(_pairs(3)))
    items = _samples(tmp_path, data[: len(data) // 2])
    assert items[-1].reason == TRUNCATED_ARCHIVE  # type: ignore[union-attr]


def test_a_gzip_bomb_is_quarantined_as_archive_bomb_without_reading_it(tmp_path):
    member = tarfile.TarInfo("0000.jpg")
    member.size = 48 << 20  # 48 MB of zeros: gzip makes it ~50 KB (ratio ~1000)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        tar.addfile(member, io.BytesIO(bytes(member.size)))
    compressed = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = compressed.compress(raw.getvalue()) + compressed.flush()
    assert len(data) < 1 << 20
    items = _samples(tmp_path, data)
    assert [(i.reason, "ratio" in i.details["error"]) for i in items] == [(ARCHIVE_BOMB, True)]  # type: ignore[union-attr]


def test_a_member_above_the_size_cap_is_not_read(tmp_path):
    big = ("0001.jpg", bytes(9 << 20))
    items = _samples(tmp_path, _tar([*_pairs(1), big, ("0001.txt", b"big one"), *_pairs(3)[4:]]))
    reasons = [getattr(i, "reason", "ok") for i in items]
    assert reasons == ["ok", MEMBER_TOO_LARGE, "ok"]
    assert items[1].details["bytes"] == [9 << 20]  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["../../escape.jpg", "/etc/passwd.jpg", "a/../../b.txt", "dir\\..\\x.jpg"])
def test_unsafe_member_names_are_rejected_with_a_reason(tmp_path, name):
    items = _samples(tmp_path, _tar([*_pairs(1), (name, b"x"), *_pairs(2)[2:]]))
    assert [getattr(i, "reason", "ok") for i in items] == ["ok", UNSAFE_MEMBER_NAME, "ok"]
    assert items[1].details["member"] == name  # type: ignore[union-attr]
    assert all(".." not in i.key and not i.key.startswith("/") for i in items if isinstance(i, MediaItem))


def test_a_link_member_is_reported_as_a_skipped_link_not_missing_media(tmp_path):
    link = tarfile.TarInfo("0001.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    items = _samples(tmp_path, _tar([*_pairs(1), link, ("0001.txt", b"linked"), *_pairs(3)[4:]]))
    assert [getattr(i, "reason", "ok") for i in items] == ["ok", LINK_MEMBER, "ok"]
    assert items[1].details["skipped"] == [  # type: ignore[union-attr]
        {"member": "0001.jpg", "type": "symlink", "target": "/etc/shadow"}
    ]


def test_a_text_gzip_bomb_is_one_archive_bomb_reject(tmp_path):
    path = tmp_path / "bomb.jsonl.gz"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        line = b'{"text": "' + b"a" * (1 << 20) + b'"}\n'
        for _ in range(300):  # 300 MB of text from ~300 KB of gzip (the cap trips past 256 MB at ratio > 200)
            out.write(compressor.compress(line))
        out.write(compressor.flush())
    got = list(iter_raw_records(path))
    assert [getattr(r, "reason", None) for r in got] == [ARCHIVE_BOMB]
