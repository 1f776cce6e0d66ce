"""ModalityMixture: text and image-text batches in one schedule, deterministic and exactly resumable."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fm_loader import DatasetManifest, Loader, PackedRow, ShardEntry, encode_shard
from fm_loader.media.loader import MediaLoader
from fm_loader.media.mixture import ModalityMixture

G = 4


@pytest.fixture(scope="module")
def text_dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    rng = np.random.default_rng(0)
    entries = []
    for s in range(3):
        rows = [PackedRow(rng.integers(0, 500, 16), [16]) for _ in range(30)]
        enc = encode_shard(rows, f"shard-{s:06d}", seq_len=16, vocab_size=500)
        for name, data in enc.files.items():
            (folder / name).write_bytes(data)
        entries.append(ShardEntry.from_info(enc.info))
    manifest = DatasetManifest("web", "v1", 16, 500, "tok", "test", entries)
    manifest.save(str(folder / "manifest.json"))
    return folder / "manifest.json"


def make(text_dataset, image_dataset, rank=0, world_size=1, weights=None, seed=0):
    loaders = {
        "text": Loader(
            str(text_dataset), G, rank=rank, world_size=world_size, seed=1, epochs=None, prefetch=0
        ),
        "image": MediaLoader(image_dataset, G, rank=rank, world_size=world_size, seed=1, epochs=None),
    }
    return ModalityMixture(loaders, weights or {"text": 2, "image": 1}, seed=seed)


def run(mixture: ModalityMixture, steps: int) -> list[tuple[str, list[int]]]:
    return [
        (name, batch["sample_ids"].tolist()) for _, (name, batch) in zip(range(steps), mixture, strict=False)
    ]


def test_schedule_keeps_each_modality_s_share_in_every_prefix(text_dataset, image_dataset):
    mixture = make(text_dataset, image_dataset, weights={"text": 3, "image": 1})
    names = [mixture.modality_of(k) for k in range(400)]
    for end in range(1, 401):
        assert abs(names[:end].count("image") - end / 4) <= 1
    assert names == [
        make(text_dataset, image_dataset, weights={"text": 3, "image": 1}).modality_of(k) for k in range(400)
    ]
    seeded = [make(text_dataset, image_dataset, weights={"text": 3, "image": 1}, seed=s) for s in range(1, 6)]
    assert any([m.modality_of(k) for k in range(400)] != names for m in seeded)


def test_batches_follow_the_schedule_and_each_loader_s_own_stream(text_dataset, image_dataset):
    mixture = make(text_dataset, image_dataset)
    got = run(mixture, 30)
    assert [name for name, _ in got] == [mixture.modality_of(k) for k in range(30)]
    alone = [
        b["sample_ids"].tolist()
        for _, b in zip(range(10), MediaLoader(image_dataset, G, seed=1, epochs=None), strict=False)
    ]
    assert [ids for name, ids in got if name == "image"] == alone[: sum(n == "image" for n, _ in got)]


@pytest.mark.parametrize(("stop", "world_size"), [(7, 2), (19, 4)])
def test_resume_continues_the_identical_sequence(text_dataset, image_dataset, stop, world_size):
    full = run(make(text_dataset, image_dataset), 30)
    first = make(text_dataset, image_dataset)
    run(first, stop)
    state = json.loads(json.dumps(first.state_dict()))
    ranks = []
    for rank in range(world_size):
        resumed = make(text_dataset, image_dataset, rank=rank, world_size=world_size)
        resumed.load_state_dict(state)
        ranks.append(run(resumed, 30 - stop))
    rebuilt = [(parts[0][0], [i for _, ids in parts for i in ids]) for parts in zip(*ranks, strict=True)]
    assert rebuilt == full[stop:]


def test_state_for_other_weights_is_refused(text_dataset, image_dataset):
    state = make(text_dataset, image_dataset).state_dict()
    with pytest.raises(ValueError, match="schedule would differ"):
        make(text_dataset, image_dataset, weights={"text": 1, "image": 1}).load_state_dict(state)
