"""MediaLoader: one global stream of bucketed batches, identical under any world size and after any resume."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from fm_loader.media.buckets import DEFAULT_BUCKETS
from fm_loader.media.decode import decode_image
from fm_loader.media.format import decode_media_index
from fm_loader.media.loader import MediaLoader
from fm_loader.media.manifest import MediaManifest
from fm_loader.media.plan import PlanMismatchError

G = 8


def global_batches(manifest, world_size: int, state=None, **kw) -> list[dict]:
    """Every global batch, rebuilt from the world_size ranks' slices (concatenated in rank order)."""
    per_rank = []
    for rank in range(world_size):
        loader = MediaLoader(manifest, G, rank=rank, world_size=world_size, **kw)
        if state is not None:
            loader.load_state_dict(state)
        per_rank.append(list(loader))
        loader.close()
    assert len({len(batches) for batches in per_rank}) == 1
    return [concat(parts) for parts in zip(*per_rank, strict=True)]


def concat(parts: tuple[dict, ...]) -> dict:
    out = {}
    for key in parts[0]:
        if key == "text":
            out[key] = [t for p in parts for t in p[key]]
        elif key == "bucket":
            assert len({int(p[key]) for p in parts}) == 1, "ranks disagree on the bucket of a global batch"
            out[key] = parts[0][key]
        else:
            out[key] = torch.cat([p[key] for p in parts])
    return out


def same(a: list[dict], b: list[dict]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.keys() != y.keys() or x["text"] != y["text"]:
            return False
        if not all(torch.equal(x[k], y[k]) for k in x if k != "text"):
            return False
    return True


def shapes_by_sample(manifest_path) -> dict[int, tuple[int, int]]:
    """sample id -> (width, height), read back from the shards' indexes."""
    manifest = MediaManifest.load(str(manifest_path))
    out, base = {}, 0
    for entry in manifest.shards:
        index = decode_media_index(Path(manifest.index_uri(entry)).read_bytes())
        for row, rec in enumerate(index.records):
            out[base + row] = (int(rec["width"]), int(rec["height"]))
        base += entry.samples
    return out


def test_every_batch_is_one_bucket_at_its_shape_and_every_sample_comes_once(image_dataset):
    batches = global_batches(image_dataset, 1, seed=3)
    sizes = shapes_by_sample(image_dataset)
    seen = []
    for batch in batches:
        height, width = DEFAULT_BUCKETS.shapes[int(batch["bucket"])]
        assert batch["images"].shape == (G, 3, height, width) and batch["images"].dtype == torch.uint8
        ids = batch["sample_ids"][batch["valid"]].tolist()
        assert {DEFAULT_BUCKETS.bucket_of(*sizes[i]) for i in ids} == {int(batch["bucket"])}
        assert not batch["images"][~batch["valid"]].any()  # padding stays black
        seen += ids
    assert sorted(seen) == list(range(130))
    # only the final (padded) batches are short, one per bucket at most
    short = [int(b["bucket"]) for b in batches if not b["valid"].all()]
    assert short == sorted(set(short)) and all(b["valid"].all() for b in batches[: len(batches) - len(short)])


def test_images_and_captions_are_the_samples_own(image_dataset):
    batch = next(iter(MediaLoader(image_dataset, G, seed=1)))
    manifest = MediaManifest.load(str(image_dataset))
    by_key = {}
    for entry in manifest.shards:
        tar = Path(manifest.shard_uri(entry)).read_bytes()
        index = decode_media_index(Path(manifest.index_uri(entry)).read_bytes())
        for rec in index.records:
            meta = json.loads(tar[rec["meta_offset"] : rec["meta_offset"] + rec["meta_size"]])
            by_key[meta["provenance"]["index"]] = (
                tar[rec["media_offset"] : rec["media_offset"] + rec["media_size"]],
                meta,
            )
    height, width = DEFAULT_BUCKETS.shapes[int(batch["bucket"])]
    for slot, sample_id in enumerate(batch["sample_ids"].tolist()):
        media, meta = by_key[sample_id]
        assert batch["text"][slot] == f"image {sample_id} of {meta['width']}x{meta['height']}"
        expected = decode_image(media, height, width)
        assert torch.equal(batch["images"][slot], torch.from_numpy(expected.copy()).permute(2, 0, 1))
        tokens = meta["caption_tokens"]
        assert batch["caption_ids"][slot, : len(tokens)].tolist() == tokens
        assert batch["caption_mask"][slot].sum() == len(tokens)
        assert not batch["caption_ids"][slot, len(tokens) :].any()


@pytest.mark.parametrize("world_size", [2, 4])
def test_rank_slices_concatenate_to_the_single_rank_batches(image_dataset, world_size):
    assert same(global_batches(image_dataset, world_size, seed=5), global_batches(image_dataset, 1, seed=5))


def test_seeds_and_epochs_reshuffle(image_dataset):
    def ids(batches: list[dict]) -> list[list[int]]:
        return [b["sample_ids"].tolist() for b in batches]

    epoch0 = ids(global_batches(image_dataset, 1, seed=0))
    both = ids(global_batches(image_dataset, 1, seed=0, epochs=2))
    assert both[: len(epoch0)] == epoch0
    epoch1 = both[len(epoch0) :]
    assert sorted(i for b in epoch1 for i in b if i >= 0) == list(range(130))
    assert epoch1 != epoch0
    assert ids(global_batches(image_dataset, 1, seed=1)) != epoch0


@pytest.mark.parametrize("trial", range(4))
def test_resume_at_a_random_batch_under_another_world_size(image_dataset, trial):
    rng = random.Random(trial)
    full = global_batches(image_dataset, 1, seed=7, epochs=2)
    stop = rng.randrange(1, len(full) - 1)
    first_ws, second_ws = rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
    loader = MediaLoader(image_dataset, G, rank=0, world_size=first_ws, seed=7, epochs=2)
    for _ in zip(range(stop), loader, strict=False):
        pass
    state = json.loads(json.dumps(loader.state_dict()))
    rest = global_batches(image_dataset, second_ws, state=state, seed=7, epochs=2)
    assert same(rest, full[stop:])


def test_state_is_refused_for_another_batch_size_or_dataset(image_dataset, audio_dataset):
    loader = MediaLoader(image_dataset, G, seed=2)
    next(iter(loader))
    state = loader.state_dict()
    with pytest.raises(ValueError, match="global_batch_size 8, this loader has 16"):
        MediaLoader(image_dataset, 16, seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="another plan"):
        MediaLoader(image_dataset, G, seed=3).load_state_dict(state)
    with pytest.raises(ValueError, match="has no 'samples_consumed'"):
        MediaLoader(image_dataset, G, seed=2).load_state_dict(
            {k: v for k, v in state.items() if k != "samples_consumed"}
        )


def test_audio_is_padded_to_the_longest_clip_of_the_global_batch(audio_dataset):
    frames_of = {i: 800 + 137 * (i % 11) for i in range(60)}
    for rank in range(2):
        for batch in MediaLoader(audio_dataset, G, rank=rank, world_size=2, seed=4):
            ids = batch["sample_ids"].tolist()
            lengths = batch["audio_lengths"].tolist()
            assert lengths == [frames_of[i] if i >= 0 else 0 for i in ids]
            assert batch["audio_mask"].sum(dim=1).tolist() == lengths
            assert batch["audio"].dtype == torch.float32
            assert not batch["audio"][~batch["audio_mask"]].any()
            for row, n in enumerate(lengths):
                if n:
                    assert batch["audio"][row, :n].abs().max() > 0.4  # a 0.5-amplitude sine
    # every rank of a global batch has the same width: the longest clip of the whole global batch
    ranks = [list(MediaLoader(audio_dataset, G, rank=r, world_size=4, seed=4)) for r in range(4)]
    whole = list(MediaLoader(audio_dataset, G, seed=4))
    for k, batch in enumerate(whole):
        assert {ranks[r][k]["audio"].shape[1] for r in range(4)} == {batch["audio"].shape[1]}
        assert batch["audio"].shape[1] == max(batch["audio_lengths"].tolist())


def test_audio_max_frames_fixes_the_width(audio_dataset):
    for batch in MediaLoader(audio_dataset, G, seed=4, audio_max_frames=1000):
        assert batch["audio"].shape == (G, 1000)
        assert max(batch["audio_lengths"].tolist()) <= 1000


def test_audio_resume_under_another_world_size(audio_dataset):
    full = global_batches(audio_dataset, 1, seed=9, epochs=2)
    loader = MediaLoader(audio_dataset, G, rank=1, world_size=2, seed=9, epochs=2)
    for _ in zip(range(5), loader, strict=False):
        pass
    assert same(global_batches(audio_dataset, 4, state=loader.state_dict(), seed=9, epochs=2), full[5:])


def test_decode_fits_the_center_of_the_image():
    # left half red, right half blue, 200x100 into a square bucket: the crop keeps the middle 100x100
    pixels = np.zeros((100, 200, 3), np.uint8)
    pixels[:, :100, 0] = 255
    pixels[:, 100:, 2] = 255
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    fitted = decode_image(out.getvalue(), 64, 64)
    assert fitted.shape == (64, 64, 3)
    assert fitted[:, :30, 0].min() > 200 and fitted[:, 34:, 2].min() > 200


@pytest.mark.slow
def test_dataloader_workers_give_the_same_batches_and_resume(image_dataset):
    inline = global_batches(image_dataset, 2, seed=6)
    assert same(global_batches(image_dataset, 2, seed=6, num_workers=2), inline)
    loader = MediaLoader(image_dataset, G, rank=0, world_size=2, seed=6, num_workers=2)
    for _ in zip(range(3), loader, strict=False):
        pass
    assert same(
        global_batches(image_dataset, 1, state=loader.state_dict(), seed=6),
        global_batches(image_dataset, 1, seed=6)[3:],
    )


@pytest.mark.parametrize(
    ("width", "height"), [(635, 476), (1643, 517), (2000, 2000), (517, 1643), (1001, 999), (4097, 3)]
)
def test_large_jpegs_decode_at_reduced_scale_to_the_exact_shape(width, height):
    # 635x476 into 224x288: draft mode rounds the reduced sides up per axis (318x238), so the crop box must
    # scale per axis too
    pixels = np.random.default_rng(width).integers(0, 255, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG")
    for shape in DEFAULT_BUCKETS.shapes:
        assert decode_image(out.getvalue(), *shape).shape == (*shape, 3)


@pytest.mark.parametrize("modality", ["image", "audio"])
def test_the_plan_resumes_exactly_from_every_batch_boundary(image_dataset, audio_dataset, modality):
    """Every position, including the padded end-of-epoch batches and the epoch boundary, replays exactly."""
    manifest = image_dataset if modality == "image" else audio_dataset
    loader = MediaLoader(manifest, G, seed=11, epochs=2)
    plan = list(loader.planned_batches())
    assert {p.epoch for p in plan} == {0, 1}
    resumed = MediaLoader(manifest, G, rank=1, world_size=2, seed=11, epochs=2)
    for stop in range(1, len(plan)):
        done = plan[stop - 1]
        state = {"epoch": done.epoch, "batches_emitted": done.index + 1, "samples_consumed": done.consumed}
        resumed.load_state_dict({**loader.state_dict(), **state})
        rest = list(resumed.planned_batches())
        assert [(p.bucket, p.refs.tolist()) for p in rest] == [
            (p.bucket, p.refs.tolist()) for p in plan[stop:]
        ]


def test_a_state_off_the_batch_boundaries_is_refused(image_dataset):
    loader = MediaLoader(image_dataset, G, seed=11)
    first = next(loader.planned_batches())
    loader.load_state_dict(
        {**loader.state_dict(), "batches_emitted": 1, "samples_consumed": first.consumed + 1}
    )
    with pytest.raises(PlanMismatchError, match=f"starts after {first.consumed} samples, the state says"):
        next(iter(loader))


def test_remote_shards_are_read_through_the_cache(image_dataset, tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    for path in image_dataset.parent.iterdir():
        fs.pipe(f"/media-remote/images/{path.name}", path.read_bytes())
    remote = MediaLoader(
        "memory://media-remote/images/manifest.json", G, seed=2, cache_dir=str(tmp_path / "cache")
    )
    local = MediaLoader(image_dataset, G, seed=2)
    assert same(list(remote), list(local))
    assert remote.metrics()["cache_misses"] == 8  # four tars and four indexes, each fetched once


def test_several_manifests_interleave_into_one_stream(image_dataset):
    batches = global_batches([image_dataset, str(image_dataset)], 2, seed=8)
    ids = [i for b in batches for i in b["sample_ids"][b["valid"]].tolist()]
    by_source = {s: sorted(i & ((1 << 48) - 1) for i in ids if i >> 48 == s) for s in (0, 1)}
    assert by_source == {0: list(range(130)), 1: list(range(130))}
    assert same(batches, global_batches([image_dataset, str(image_dataset)], 1, seed=8))
    with pytest.raises(ValueError, match="one MediaLoader reads one modality"):
        MediaLoader([image_dataset, MediaManifest("a", "v1", "audio-text", "x")], G)


def test_captions_are_cut_to_max_caption_tokens(image_dataset):
    for batch in MediaLoader(image_dataset, G, seed=1, max_caption_tokens=3):
        assert batch["caption_ids"].shape == (G, 3)
        valid = batch["valid"]
        ids = batch["sample_ids"][valid].tolist()
        # sample i's caption has 2 + i % 7 tokens, the first of them i % 1000
        assert batch["caption_mask"][valid].sum(dim=1).tolist() == [min(3, 2 + i % 7) for i in ids]
        assert batch["caption_ids"][valid, 0].tolist() == [i % 1000 for i in ids]


def test_stereo_clips_are_averaged_to_mono(tmp_path):
    from media_shards import audio_bytes, meta, write_dataset

    from fm_loader.media.format import MediaSample

    def stereo(n: int, start: int) -> list[MediaSample]:
        return [
            MediaSample(f"s{i}", audio_bytes(500 + i, i, "wav", channels=2), "wav", "t", meta(i))
            for i in range(start, start + n)
        ]

    write_dataset(tmp_path / "stereo", "audio-text", stereo, [4])
    batch = next(iter(MediaLoader(tmp_path / "stereo" / "manifest.json", 4)))
    assert batch["audio"].shape == (4, 503)
    assert batch["audio_lengths"].tolist() == [500 + i for i in batch["sample_ids"].tolist()]
    assert batch["audio"].abs().max() > 0.4  # both channels hold the same sine: the average keeps it
