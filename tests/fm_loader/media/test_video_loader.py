"""The video-text builder: (B, F, 3, H, W) keyframes bucketed by aspect ratio and keyframe count, captions,
and the media loader's global stream, state and resume under any world size."""

from __future__ import annotations

import json
import random

import pytest
import torch
from media_shards import VIDEO_SHAPES, frame_level, image_samples, video_samples, write_dataset

from fm_loader import Loader
from fm_loader.kinds import read_manifest

G = 8


def global_batches(manifest, world_size: int, state=None, **kw) -> list[dict]:
    per_rank = []
    for rank in range(world_size):
        loader = Loader(manifest, G, rank=rank, world_size=world_size, prefetch=0, **kw)
        if state is not None:
            loader.load_state_dict(state)
        per_rank.append(list(loader))
        loader.close()
    batches = []
    for parts in zip(*per_rank, strict=True):
        assert len({int(p["bucket"]) for p in parts}) == 1
        batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0] if k not in ("text", "bucket")}
        batches.append({**batch, "text": [t for p in parts for t in p["text"]], "bucket": parts[0]["bucket"]})
    return batches


def test_batches_are_one_bucket_of_aspect_and_frame_count_with_each_samples_own_frames(video_dataset):
    loader = Loader(video_dataset, G, seed=3, prefetch=0)
    assert read_manifest(video_dataset).kind == "video-text"
    seen = []
    for batch in loader:
        frames, mask, valid = batch["frames"], batch["frame_mask"], batch["valid"]
        n, count, channels, height, width = frames.shape
        assert (n, channels, frames.dtype) == (G, 3, torch.uint8)
        aspect, which = divmod(int(batch["bucket"]), len(loader.frame_counts))
        assert count == loader.frame_counts[which]
        assert (height, width) == tuple(loader.buckets.shapes[aspect])
        assert torch.equal(mask, valid[:, None].expand(n, count))
        for slot in torch.nonzero(valid).flatten().tolist():
            sample = int(batch["sample_ids"][slot]) & ((1 << 48) - 1)
            assert VIDEO_SHAPES[sample % len(VIDEO_SHAPES)][2] == count
            levels = frames[slot].float().mean(dim=(1, 2, 3))
            expected = torch.tensor([frame_level(sample, f) for f in range(count)], dtype=torch.float32)
            assert torch.allclose(levels, expected, atol=3), (sample, levels, expected)
            assert batch["caption_ids"][slot, :2].tolist() == [sample % 1000, 7]
            seen.append(sample)
        assert not frames[~valid].any()
    assert sorted(seen) == list(range(61))


@pytest.mark.parametrize("world_size", [2, 4])
def test_rank_slices_concatenate_to_the_single_rank_batches(video_dataset, world_size):
    one = global_batches(video_dataset, 1, seed=5)
    many = global_batches(video_dataset, world_size, seed=5)
    assert len(one) == len(many)
    for a, b in zip(one, many, strict=True):
        assert a["text"] == b["text"] and torch.equal(a["frames"], b["frames"])


@pytest.mark.parametrize("trial", range(3))
def test_resume_at_a_random_batch_under_another_world_size(video_dataset, trial):
    rng = random.Random(trial)
    full = global_batches(video_dataset, 1, seed=7, epochs=2)
    stop = rng.randrange(1, len(full) - 1)
    first_ws, second_ws = rng.choice([1, 2, 4]), rng.choice([2, 4])
    loader = Loader(video_dataset, G, rank=0, world_size=first_ws, seed=7, epochs=2, prefetch=0)
    for _ in zip(range(stop), loader, strict=False):
        pass
    state = json.loads(json.dumps(loader.state_dict()))
    rest = global_batches(video_dataset, second_ws, state=state, seed=7, epochs=2)
    assert [b["text"] for b in rest] == [b["text"] for b in full[stop:]]
    assert all(torch.equal(a["frames"], b["frames"]) for a, b in zip(rest, full[stop:], strict=True))


def clip_samples(n: int, start: int = 0) -> list:
    """Video samples where every other one carries a (fake, distinct) clip member."""
    out = video_samples(n, start)
    for i, sample in enumerate(out, start):
        if i % 2 == 0:
            sample.clip = f"clip bytes of sample {i}".encode() * (i + 1)
    return out


def test_a_release_with_clips_yields_each_samples_clip_and_one_without_yields_no_clips_key(
    tmp_path, video_dataset
):
    manifest = write_dataset(tmp_path / "clips", "video-text", clip_samples, [9, 8])
    assert [s.shape_summary["clips"] for s in manifest.shards] == [5, 4]
    found = {}
    for batch in Loader(str(tmp_path / "clips" / "manifest.json"), 4, seed=1, prefetch=0):
        assert len(batch["clips"]) == 4
        for slot in torch.nonzero(batch["valid"]).flatten().tolist():
            found[int(batch["text"][slot].split()[1])] = batch["clips"][slot]
        assert all(c is None for c, v in zip(batch["clips"], batch["valid"].tolist(), strict=True) if not v)
    assert found == {
        i: (f"clip bytes of sample {i}".encode() * (i + 1) if i % 2 == 0 else None) for i in range(17)
    }
    assert "clips" not in next(iter(Loader(video_dataset, 4, prefetch=0)))
    in_workers = [
        b["clips"] for b in Loader(str(tmp_path / "clips" / "manifest.json"), 4, seed=1, num_workers=2)
    ]
    in_process = [
        b["clips"] for b in Loader(str(tmp_path / "clips" / "manifest.json"), 4, seed=1, prefetch=0)
    ]
    assert in_workers == in_process  # clips cross the worker hand-over


def test_a_clip_is_refused_on_an_image_sample_and_a_malformed_fourth_member_is_named(tmp_path):
    from fm_loader.media.format import encode_media_shard, trailing_clip
    from fm_loader.tarwriter import tar_header

    (image,) = image_samples(1)
    image.clip = b"x"
    with pytest.raises(ValueError, match="only a video-text sample carries a clip"):
        encode_media_shard([image], "s")
    (video,) = clip_samples(1)
    tar = encode_media_shard([video], "s").files["s.tar"]
    start = tar.index(b'{"caption_tokens"')
    meta_size = tar.index(b"}", tar.index(b'"width"', start)) + 1 - start
    tail = memoryview(tar)[start:-1024]
    assert bytes(trailing_clip(tail, meta_size) or b"") == video.clip
    at = meta_size + (-meta_size) % 512
    other = bytearray(tail)
    other[at : at + 512] = tar_header("s/vid000000.txt", len(video.clip))  # a member, but not a clip
    with pytest.raises(ValueError, match=r"is 's/vid000000.txt', not a whole .clip.mp4"):
        trailing_clip(memoryview(bytes(other)), meta_size)
    garbage = bytearray(tail)
    garbage[at : at + 8] = b"\xff" * 8
    with pytest.raises(ValueError, match="no valid tar header"):
        trailing_clip(memoryview(bytes(garbage)), meta_size)
