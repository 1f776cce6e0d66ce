"""Grouping and reading media deliveries: files by key, tars (truncated too), media JSONL, what text land skips."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from media_fixtures import jpeg_image, tone_wav

from fm_assets.transforms.readers.media_samples import (
    MISSING_CAPTION,
    MISSING_MEDIA,
    TRUNCATED_ARCHIVE,
    UNREADABLE_TEXT,
    MediaItem,
    MediaProblem,
    group_media,
    iter_jsonl_samples,
    iter_tar_samples,
    jsonl_references,
    media_claims,
    read_file_group,
)


def tar_bytes(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_claims_media_their_captions_tars_and_media_jsonl_but_not_plain_text():
    paths = [
        "a/cat.jpg",
        "a/cat.txt",
        "a/cat.json",
        "a/notes.txt",
        "b/x.wav",
        "b/x.txt",
        "w.tar",
        "l.media.jsonl",
        "d.jsonl",
    ]
    claims = media_claims(paths)
    assert claims == {
        "a/cat.jpg": "media",
        "a/cat.txt": "caption",
        "a/cat.json": "caption",
        "b/x.wav": "media",
        "b/x.txt": "caption",
        "w.tar": "tar",
        "l.media.jsonl": "media_jsonl",
    }


def test_groups_by_key_and_jsonl_takes_the_files_it_names():
    paths = ["a/cat.jpg", "a/cat.txt", "a/dog.png", "l/pic.png", "l/list.media.jsonl"]
    groups = group_media(paths, {"l/list.media.jsonl": ["l/pic.png", "l/gone.png"]})
    assert [(g.kind, g.paths) for g in groups] == [
        ("files", ("a/cat.jpg", "a/cat.txt")),
        ("files", ("a/dog.png",)),
        ("jsonl", ("l/list.media.jsonl", "l/pic.png")),
    ]


def test_file_group_prefers_txt_then_json_and_rejects_missing_or_unreadable(tmp_path: Path):
    (tmp_path / "cat.jpg").write_bytes(jpeg_image(64, 64))
    (tmp_path / "cat.json").write_text(json.dumps({"alt": "a cat"}))
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe not utf-8")
    local = lambda p: tmp_path / p  # noqa: E731
    (item,) = [read_file_group(g, local) for g in group_media(["cat.jpg", "cat.json"], {})]
    assert isinstance(item, MediaItem) and item.text == "a cat" and item.media_ext == "jpg"
    (tmp_path / "bad.jpg").write_bytes(b"x")
    (bad,) = [read_file_group(g, local) for g in group_media(["bad.jpg", "bad.txt"], {})]
    assert isinstance(bad, MediaProblem) and bad.reason == UNREADABLE_TEXT
    (tmp_path / "lonely.wav").write_bytes(tone_wav(0.5))
    (lonely,) = [read_file_group(g, local) for g in group_media(["lonely.wav"], {})]
    assert isinstance(lonely, MediaProblem) and lonely.reason == "missing_transcript"


def test_tar_samples_and_a_truncated_tar_keeps_what_came_before(tmp_path: Path):
    data = tar_bytes(
        [
            ("s/0001.jpg", jpeg_image(64, 48)),
            ("s/0001.txt", b"first"),
            ("s/0002.txt", b"caption only"),
            ("s/0003.jpg", jpeg_image(64, 48, seed=3)),
        ]
    )
    path = tmp_path / "w.tar"
    path.write_bytes(data)
    items = list(iter_tar_samples("w.tar", path))
    assert [type(i).__name__ for i in items] == ["MediaItem", "MediaProblem", "MediaProblem"]
    assert items[0].key == "s/0001" and items[0].text == "first"  # type: ignore[union-attr]
    assert [i.reason for i in items[1:]] == [MISSING_MEDIA, MISSING_CAPTION]  # type: ignore[union-attr]
    path.write_bytes(data[: len(data) // 2])
    cut = list(iter_tar_samples("w.tar", path))
    assert isinstance(cut[-1], MediaProblem) and cut[-1].reason == TRUNCATED_ARCHIVE
    assert isinstance(cut[0], MediaItem)


def test_media_jsonl_lines_with_bad_json_and_missing_files(tmp_path: Path):
    (tmp_path / "pic.png").write_bytes(b"png bytes")
    listing = tmp_path / "list.media.jsonl"
    listing.write_text(
        json.dumps({"image": "pic.png", "caption": "a picture"})
        + "\n{not json\n"
        + json.dumps({"image": "gone.png", "caption": "x"})
        + "\n"
    )
    assert jsonl_references("l/list.media.jsonl", listing) == ["l/pic.png", "l/gone.png"]
    items = list(
        iter_jsonl_samples(
            "l/list.media.jsonl", listing, lambda p: tmp_path / "pic.png" if p == "l/pic.png" else None
        )
    )
    assert isinstance(items[0], MediaItem) and items[0].media_path == "l/pic.png"
    assert [i.reason for i in items[1:]] == ["malformed_json", MISSING_MEDIA]  # type: ignore[union-attr]
