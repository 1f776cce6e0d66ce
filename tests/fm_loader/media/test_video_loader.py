"""The video-text builder: (B, F, 3, H, W) keyframes bucketed by aspect ratio and keyframe count, captions,
and the media loader's global stream, state and resume under any world size."""

from __future__ import annotations

import json
import random

import pytest
import torch
from media_shards import VIDEO_SHAPES, frame_level

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
