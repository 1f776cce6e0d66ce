"""One Loader core for every sample kind: media manifests through ``fm_loader.Loader``, the same metrics from
media workers as from text ones, one state check, and the option groups beside the flat keywords."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import pytest
import torch

from fm_loader import Loader
from fm_loader.media.loader import MediaLoader
from fm_loader.options import MediaOptions, ReadOptions, TokenOptions

G = 8
TEXT = Path(__file__).parent.parent


def batches(loader) -> list[dict]:
    return list(loader)


def test_the_loader_reads_an_image_release_as_the_old_media_loader_did(image_dataset):
    new, old = Loader(image_dataset, G, seed=1, prefetch=0), MediaLoader(image_dataset, G, seed=1)
    assert new.kind == "image-text" and new.modality == "image-text" and new.fingerprint == old.fingerprint
    got, want = batches(new), batches(old)
    assert len(got) == len(want) > 10
    for a, b in zip(got, want, strict=True):
        assert int(a["bucket"]) == int(b["bucket"]) and torch.equal(a["images"], b["images"])
        assert torch.equal(a["sample_ids"], b["sample_ids"]) and a["text"] == b["text"]
    state = new.state_dict()
    assert state["format"] == "fm_loader.media-state/1" and state["global_batch_size"] == G
    assert (new.epoch, new.samples_consumed) == (0, new.epoch_samples) and new.batches_emitted == len(got)


def test_audio_options_reach_the_audio_builder(audio_dataset):
    loader = Loader(audio_dataset, G, seed=2, media=MediaOptions(audio_max_frames=900))
    first = next(iter(loader))
    assert loader.kind == "audio-text" and loader.sample_rate == 16000
    assert first["audio"].shape == (G, 900) and int(first["audio_lengths"].max()) == 900


def test_one_state_check_refuses_a_state_of_another_kind(image_dataset, tmp_path):
    import sys

    sys.path.insert(0, str(TEXT))
    from loader_helpers import make_dataset  # pyright: ignore[reportMissingImports]

    text = Loader(make_dataset(str(tmp_path / "text"), [12, 9]), 4)
    images = Loader(image_dataset, G)
    with pytest.raises(ValueError, match=r"not an fm_loader media loader state .*fm_loader\.state/1"):
        images.load_state_dict(text.state_dict())
    with pytest.raises(ValueError, match=r"not an fm_loader loader state .*fm_loader\.media-state/1"):
        text.load_state_dict(images.state_dict())
    with pytest.raises(ValueError, match="media loader state 'samples_consumed' must be int"):
        images.load_state_dict({**images.state_dict(), "samples_consumed": "3"})


def test_option_groups_and_flat_keywords_make_the_same_loader(image_dataset, tmp_path):
    grouped = Loader(
        image_dataset,
        G,
        read=ReadOptions(skip_corrupt=True, cache_dir=str(tmp_path)),
        media=MediaOptions(max_caption_tokens=3),
    )
    flat = Loader(image_dataset, G, skip_corrupt=True, cache_dir=str(tmp_path), max_caption_tokens=3)
    assert grouped.options == flat.options and grouped.max_caption_tokens == 3
    assert flat.options.read.skip_corrupt and flat.options.tokens == TokenOptions()
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['cache_directory'\]"):
        Loader(image_dataset, G, cache_directory=str(tmp_path))


@pytest.mark.slow
def test_media_workers_report_build_time_and_cache_counters_like_text_workers(image_dataset, tmp_path):
    fs = fsspec.filesystem("memory")
    folder = image_dataset.parent
    for root, _, files in os.walk(folder):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), folder)
            fs.pipe(f"/mediabucket/images/{rel}", Path(root, name).read_bytes())
    remote = "memory://mediabucket/images/manifest.json"
    inline = Loader(image_dataset, G, seed=3, prefetch=0)
    want = [b["sample_ids"].tolist() for b in inline]
    workers = Loader(remote, G, seed=3, num_workers=2, cache_dir=str(tmp_path / "cache"))
    assert [b["sample_ids"].tolist() for b in workers] == want
    m = workers.metrics()
    assert m["samples"] == m["rows"] == inline.metrics()["rows"] == 130 and m["build_s"] > 0
    main = workers.cache.stats
    assert main.misses == 4  # the main process planned from the 4 sample indexes, and read no tar
    assert m["cache_misses"] >= main.misses + 4 and m["cache_bytes_downloaded"] > main.bytes_downloaded
    fs.rm("/mediabucket", recursive=True)
