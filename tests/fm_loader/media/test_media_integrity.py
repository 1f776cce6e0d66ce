"""Corrupt samples are reported with their shard and key (or skipped and counted); refused releases do not load."""

from __future__ import annotations

import shutil

import pytest
from media_shards import image_samples, write_dataset

from fm_loader.media.errors import CorruptSampleError, NamespaceError, RevokedDatasetError
from fm_loader.media.format import decode_media_index
from fm_loader.media.loader import MediaLoader
from fm_loader.media.manifest import MediaManifest
from fm_loader.media.verify import verify_media_dataset
from fm_loader.sources import CorruptRowError, CorruptShardError

G = 4


@pytest.fixture
def damaged(image_dataset, tmp_path):
    """A private copy of the image dataset and the (shard path, sample index, key) whose media gets a flipped byte."""
    folder = tmp_path / "copy"
    shutil.copytree(image_dataset.parent, folder)
    manifest = MediaManifest.load(str(folder / "manifest.json"))
    entry = manifest.shards[1]
    index = decode_media_index((folder / entry.index_path).read_bytes())
    row = 7
    rec = index.records[row]
    tar = folder / entry.path
    data = bytearray(tar.read_bytes())
    data[int(rec["media_offset"]) + int(rec["media_size"]) // 2] ^= 0x40
    tar.write_bytes(bytes(data))
    return folder / "manifest.json", str(tar), row, index.key(row)


def test_a_flipped_byte_is_reported_with_shard_and_sample(damaged):
    manifest, shard, row, key = damaged
    with pytest.raises(CorruptSampleError) as caught:
        list(MediaLoader(manifest, G, seed=0))
    err = caught.value
    assert isinstance(err, CorruptRowError)  # text-loader handlers catch it too
    assert (err.shard, err.row, err.key) == (shard, row, key)
    assert shard in str(err) and key in str(err) and f"sample {row}" in str(err)


def test_skip_corrupt_masks_the_sample_and_counts_it(damaged, image_dataset):
    manifest, _, row, _ = damaged
    loader = MediaLoader(manifest, G, seed=0, skip_corrupt=True)
    batches = list(loader)
    clean = list(MediaLoader(image_dataset, G, seed=0))
    bad_id = 40 + row  # shard 1 starts after shard 0's 40 samples
    masked = [(b["sample_ids"][~b["valid"] & (b["sample_ids"] >= 0)]).tolist() for b in batches]
    assert [i for ids in masked for i in ids] == [bad_id]
    assert loader.metrics()["corrupt_samples_skipped"] == 1
    # the same plan as the clean dataset: only the damaged sample differs
    assert [b["sample_ids"].tolist() for b in batches] == [b["sample_ids"].tolist() for b in clean]
    for got, want in zip(batches, clean, strict=True):
        keep = got["valid"]
        assert (got["images"][keep] == want["images"][keep]).all()


def test_a_missing_shard_is_named(image_dataset, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(image_dataset.parent, folder)
    (folder / "shard-000002.tar").unlink()
    with pytest.raises(CorruptShardError, match=r"shard-000002\.tar"):
        list(MediaLoader(folder / "manifest.json", G, seed=0))
    loader = MediaLoader(folder / "manifest.json", G, seed=0, skip_corrupt=True)
    list(loader)
    assert loader.metrics()["corrupt_samples_skipped"] == 35


def test_an_index_that_differs_from_the_manifest_is_refused(image_dataset, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(image_dataset.parent, folder)
    shutil.copy(folder / "shard-000000.idx", folder / "shard-000003.idx")
    with pytest.raises(
        CorruptShardError, match=r"shard-000003.tar.*sample index .* differs from the manifest"
    ):
        list(MediaLoader(folder / "manifest.json", G, seed=0))


@pytest.fixture(scope="module")
def on_device_dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ns") / "od"
    write_dataset(folder, "image-text", image_samples, [6], namespace="on_device")
    return folder / "manifest.json"


def test_a_namespace_outside_the_allowed_ones_is_refused(on_device_dataset):
    with pytest.raises(NamespaceError, match="namespace 'on_device'"):
        MediaLoader(on_device_dataset, G)
    assert len(list(MediaLoader(on_device_dataset, G, allowed_namespaces=("on_device",)))) >= 1


def test_a_revoked_release_is_refused_unless_allowed(tmp_path):
    revoked = {"at": "2026-01-01T00:00:00Z", "reason": "licence withdrawn", "superseded_by": "v2"}
    write_dataset(tmp_path / "rv", "image-text", image_samples, [6], revoked=revoked)
    path = tmp_path / "rv" / "manifest.json"
    with pytest.raises(RevokedDatasetError, match="licence withdrawn"):
        MediaLoader(path, G)
    assert len(list(MediaLoader(path, G, allow_revoked=True))) >= 1


def test_verify_accepts_a_clean_dataset_and_names_a_damaged_sample(image_dataset, damaged):
    clean = verify_media_dataset(str(image_dataset))
    assert clean.ok and clean.shards == 4 and clean.rows == 130
    manifest, shard, row, key = damaged
    report = verify_media_dataset(str(manifest))
    assert [(p.shard, p.row) for p in report.problems] == [(shard, None), (shard, row)]
    assert "sha256 differs" in report.problems[0].what and key in report.problems[1].what
