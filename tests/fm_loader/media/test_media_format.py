"""The media shard writer: reproducible bytes, webdataset-readable tars, a verified index, clear refusals."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest
import soundfile
import webdataset as wds
from media_shards import IMAGE_SIZES, audio_bytes, audio_samples, image_bytes, image_samples, meta
from PIL import Image

from fm_loader.format import sample_checksum32
from fm_loader.media.buckets import DEFAULT_BUCKETS
from fm_loader.media.format import (
    CorruptMediaIndexError,
    MediaSample,
    decode_media_index,
    encode_media_shard,
)
from fm_loader.media.manifest import MediaManifest, MediaShardEntry


def test_same_samples_give_the_same_bytes():
    first = encode_media_shard(image_samples(12), "s")
    second = encode_media_shard(image_samples(12), "s")
    assert first.files == second.files
    other = encode_media_shard(image_samples(12, start=1), "s")
    assert other.files["s.tar"] != first.files["s.tar"]


def test_tar_members_are_ordered_with_fixed_headers():
    enc = encode_media_shard(image_samples(3), "shard-7")
    with tarfile.open(fileobj=io.BytesIO(enc.files["shard-7.tar"])) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == [
        f"shard-7/img{i:06d}.{ext}" for i in range(3) for ext in ("png" if i == 0 else "jpg", "txt", "json")
    ]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, 0, "", "", 0o644)}


def test_webdataset_reads_every_sample_as_it_is(tmp_path):
    samples = image_samples(10)
    enc = encode_media_shard(samples, "shard-000000")
    path = tmp_path / "shard-000000.tar"
    path.write_bytes(enc.files["shard-000000.tar"])
    read = list(wds.WebDataset(str(path), shardshuffle=False))
    assert [r["__key__"] for r in read] == [f"shard-000000/{s.key}" for s in samples]
    for got, sample in zip(read, samples, strict=True):
        assert got[sample.media_ext] == sample.media
        assert got["txt"].decode() == sample.text
        doc = json.loads(got["json"])
        assert doc["licence"] == "cc-by-4.0" and doc["provenance"] == sample.meta["provenance"]
        assert (doc["width"], doc["height"]) == Image.open(io.BytesIO(sample.media)).size
        assert doc["caption_tokens"] == sample.meta["caption_tokens"]


def test_webdataset_decodes_audio_samples(tmp_path):
    samples = audio_samples(6)
    path = tmp_path / "a.tar"
    path.write_bytes(encode_media_shard(samples, "a").files["a.tar"])
    read = list(wds.WebDataset(str(path), shardshuffle=False).decode())
    assert [r["__key__"] for r in read] == [f"a/{s.key}" for s in samples]
    for got, sample in zip(read, samples, strict=True):
        wave, rate = soundfile.read(io.BytesIO(got[sample.media_ext]))
        assert rate == 16000 and len(wave) == got["json"]["frames"]
        assert got["txt"] == sample.text


def test_index_locates_members_and_checksums_whole_samples():
    samples = image_samples(9)
    enc = encode_media_shard(samples, "s")
    tar = enc.files["s.tar"]
    index = decode_media_index(enc.files["s.idx"])
    assert index.samples == 9
    for i, (rec, sample) in enumerate(zip(index.records, samples, strict=True)):
        assert index.key(i) == sample.key
        media = tar[rec["media_offset"] : rec["media_offset"] + rec["media_size"]]
        assert media == sample.media
        assert tar[rec["text_offset"] : rec["text_offset"] + rec["text_size"]].decode() == sample.text
        whole = tar[rec["sample_offset"] : rec["sample_offset"] + rec["sample_size"]]
        assert sample_checksum32(whole) == int(rec["checksum"])
        assert (int(rec["width"]), int(rec["height"])) == IMAGE_SIZES[i % len(IMAGE_SIZES)]
        assert int(rec["caption_tokens"]) == len(sample.meta["caption_tokens"])
    # the samples tile the tar up to its end-of-archive blocks
    ends = index.records["sample_offset"] + index.records["sample_size"]
    assert list(index.records["sample_offset"][1:]) == list(ends[:-1])
    assert int(ends[-1]) + 1024 == len(tar)


def test_audio_shapes_come_from_the_headers():
    samples = audio_samples(6)
    enc = encode_media_shard(samples, "a")
    index = decode_media_index(enc.files["a.idx"])
    frames = [800 + 137 * (i % 11) for i in range(6)]
    assert index.records["frames"].tolist() == frames
    assert set(index.records["sample_rate"].tolist()) == {16000}
    assert enc.info.modality == "audio-text"
    assert enc.info.shape_summary["frames"] == [min(frames), max(frames)]
    expected = [min(frames) / 16000, max(frames) / 16000]
    assert enc.info.shape_summary["duration_s"] == pytest.approx(expected, abs=1e-6)


def test_shape_summary_is_the_default_bucket_histogram():
    samples = image_samples(27)
    enc = encode_media_shard(samples, "s")
    sizes = np.array([IMAGE_SIZES[i % len(IMAGE_SIZES)] for i in range(27)])
    expected = np.bincount(
        DEFAULT_BUCKETS.bucket_ids(sizes[:, 0], sizes[:, 1]), minlength=len(DEFAULT_BUCKETS)
    )
    assert enc.info.shape_summary["bucket_counts"] == expected.tolist()
    assert sum(enc.info.shape_summary["bucket_counts"]) == 27


def test_a_damaged_index_is_refused():
    data = bytearray(encode_media_shard(image_samples(3), "s").files["s.idx"])
    data[40] ^= 1
    with pytest.raises(CorruptMediaIndexError, match="checksum"):
        decode_media_index(bytes(data), "s.idx")


def bad(**change: object) -> MediaSample:
    fields = {"key": "k1", "media": image_bytes(32, 32, 0), "media_ext": "jpg", "text": "t", "meta": meta(0)}
    return MediaSample(**{**fields, **change})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([bad(media_ext="gif")], "unknown media_ext 'gif'"),
        ([bad(media_ext="png")], "media_ext is 'png' but the bytes are JPEG"),
        ([bad(key="a.b")], "key 'a.b' must be"),
        ([bad(), bad()], r"sample 1 \(k1\): key collides with sample 0"),
        ([bad(meta={"licence": "x"})], r"meta has no \['provenance'\]"),
        ([bad(meta=meta(0, score=float("nan")))], "not JSON-serialisable"),
        ([bad(meta=meta(0, when=object()))], "not JSON-serialisable"),
        ([bad(meta=meta(0, width=31))], "meta says width=31 but the media has 32"),
        ([bad(meta=meta(0, caption_tokens=[1, -2]))], "caption_tokens"),
        ([bad(text="\ud800")], "not valid UTF-8"),
        ([bad(media=b"not an image")], "not a readable jpg image"),
        ([bad(), bad(key="k2", media=audio_bytes(100, 0), media_ext="wav")], "one modality per shard"),
        ([], "no samples"),
    ],
)
def test_invalid_samples_are_refused_with_shard_and_sample_named(samples, message):
    with pytest.raises(ValueError, match=message) as caught:
        encode_media_shard(samples, "shard-9")
    if samples:
        assert "shard 'shard-9'" in str(caught.value)


def test_manifest_round_trips_deterministically(tmp_path):
    enc = encode_media_shard(image_samples(5), "shard-000000")
    entry = MediaShardEntry.from_info(enc.info, "shards")
    manifest = MediaManifest("cc", "v1", "image-text", "abc", [entry], namespace="on_device")
    manifest.save(str(tmp_path / "m.json"))
    loaded = MediaManifest.load(str(tmp_path / "m.json"))
    assert loaded == manifest
    assert loaded.to_json() == manifest.to_json()
    assert loaded.shard_uri(entry) == str(tmp_path / "shards" / "shard-000000.tar")
    assert loaded.samples == 5 and loaded.namespace == "on_device" and loaded.revoked is None


def test_text_manifest_is_not_mistaken_for_a_media_one():
    with pytest.raises(ValueError, match="not a media manifest"):
        MediaManifest.from_json(json.dumps({"name": "web", "shards": []}))
