"""One manifest reader for every sample kind, and the trainer's clear errors on a wrong path or weight."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from loader_helpers import make_dataset

from fm_loader import DatasetManifest, Loader
from fm_loader.kinds import KINDS, manifest_location, read_manifest
from fm_loader.media.manifest import MediaManifest
from fm_loader.mixture import MixtureError

sys.path.insert(0, str(Path(__file__).parent / "media"))
from media_shards import image_samples, write_dataset  # pyright: ignore[reportMissingImports]


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kinds")
    text = Path(make_dataset(str(root / "text"), [6, 4]))
    write_dataset(root / "images", "image-text", image_samples, [5])
    return {"text": text, "images": root / "images" / "manifest.json"}


def test_one_reader_returns_each_kind_with_its_registered_manifest_type(releases):
    text, images = read_manifest(str(releases["text"])), read_manifest(str(releases["images"]))
    assert isinstance(text, DatasetManifest) and text.kind == "packed-tokens"
    assert isinstance(images, MediaManifest) and images.kind == "image-text"
    assert isinstance(text, KINDS[text.kind].manifest) and isinstance(images, KINDS[images.kind].manifest)
    assert text.rows == 10 and images.samples == 5


def test_every_manifest_is_one_type_with_a_kind(releases):
    from fm_loader import Manifest

    text, images = Manifest.load(str(releases["text"])), Manifest.load(str(releases["images"].parent))
    assert isinstance(text, Manifest) and isinstance(images, Manifest)
    assert (text.kind, images.kind) == ("packed-tokens", "image-text")
    assert images.shard_uri(images.shards[0]) == str(releases["images"].parent / "shard-000000.tar")


def test_a_text_reader_refuses_a_media_manifest_by_name(releases):
    with pytest.raises(
        ValueError, match=r"manifest.json is not a packed-token manifest \(its kind is 'image-text'\)"
    ):
        DatasetManifest.load(str(releases["images"]))


def test_a_manifest_path_to_a_non_json_file_names_the_path(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_bytes(b"\x89PNG not a manifest")
    for read in (read_manifest, DatasetManifest.load, MediaManifest.load):
        with pytest.raises(ValueError, match=rf"{bad} is not a manifest: it is not JSON"):
            read(str(bad))
    with pytest.raises(ValueError, match=rf"{bad} is not a manifest: it is not JSON"):
        Loader(str(bad), global_batch_size=2)


def test_a_release_folder_resolves_to_its_manifest(releases):
    folder = releases["text"].parent
    assert manifest_location(str(folder)) == str(folder / "manifest.json")
    assert read_manifest(folder).location == str(folder / "manifest.json")
    via_folder = [b["sample_ids"].tolist() for b in Loader(str(folder), global_batch_size=2, seed=3)]
    via_file = [b["sample_ids"].tolist() for b in Loader(str(releases["text"]), global_batch_size=2, seed=3)]
    assert via_folder == via_file and len(via_file) == 5


def test_a_folder_without_a_manifest_names_the_expected_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"has no manifest.json.*expected {tmp_path}/manifest.json"):
        Loader(str(tmp_path), global_batch_size=2)
    with pytest.raises(FileNotFoundError, match="expected"):
        MediaManifest.load(str(tmp_path))


@pytest.mark.parametrize("weight", [math.nan, math.inf])
def test_a_non_finite_weight_names_the_dataset_and_the_weight(releases, weight):
    spec = {"sources": [{"manifest": str(releases["text"]), "weight": weight}]}
    with pytest.raises(
        MixtureError,
        match=rf"manifest: {releases['text']}\): 'weight' must be a finite number > 0, got {weight}",
    ):
        Loader(spec, global_batch_size=2)
    spec = {"sources": [{"manifest": str(releases["text"]), "token_weight": weight}]}
    with pytest.raises(MixtureError, match=rf"'token_weight' must be a finite number > 0, got {weight}"):
        Loader(spec, global_batch_size=2)


def test_a_non_finite_modality_weight_names_the_source(releases):
    from fm_loader.media.mixture import ModalityMixture

    text = Loader(str(releases["text"]), global_batch_size=2)
    with pytest.raises(ValueError, match="source 'text': weight must be a finite number > 0, got nan"):
        ModalityMixture({"text": text}, {"text": math.nan})


def test_one_verify_checks_a_release_of_any_kind(releases, tmp_path):
    import shutil

    from fm_loader import verify_dataset
    from fm_loader.media.verify import verify_media_dataset

    text, images = verify_dataset(str(releases["text"])), verify_dataset(releases["images"].parent)
    assert text.ok and (text.shards, text.rows) == (2, 10)
    assert images.ok and (images.shards, images.rows) == (1, 5)
    copy = tmp_path / "images"
    shutil.copytree(releases["images"].parent, copy)
    tar = copy / "shard-000000.tar"
    data = bytearray(tar.read_bytes())
    data[700] ^= 0xFF  # inside the first sample's media bytes
    tar.write_bytes(bytes(data))
    damaged = verify_dataset(str(copy / "manifest.json"))
    assert not damaged.ok and damaged.problems == verify_media_dataset(str(copy / "manifest.json")).problems
    assert any(p.row == 0 for p in damaged.problems)


def test_the_pin_the_readme_points_to_is_the_one_the_loader_checks(releases):
    from fm_loader import PinningError, read_manifest

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert "`TOKENIZER_SHA256` is the release manifest's `tokenizer_hash` field" in readme
    assert "`fm card latest --name fm-demo --json`" in readme and "`tokenizer_sha256`" in readme
    pinned = read_manifest(str(releases["text"])).tokenizer_hash
    assert len(Loader(str(releases["text"]), 2, expected_tokenizer_hash=pinned)) == 5
    with pytest.raises(PinningError, match="refusing to start"):
        Loader(str(releases["text"]), 2, expected_tokenizer_hash=pinned + "x")
