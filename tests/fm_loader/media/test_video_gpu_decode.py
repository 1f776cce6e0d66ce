"""Video-text keyframe strips through the GPU image decode path, run on the CPU with an injected JPEG codec:
the same batches as the CPU path except pixels, strips the codec refuses decoded by the CPU path's own function
(identical frames), corrupt strips reported as on the CPU; without a GPU the CPU path (identical frames); the
real nvJPEG path where CUDA and torchvision exist."""

from __future__ import annotations

import pytest
import torch
from media_shards import (
    VIDEO_SHAPES,
    fake_codec,
    frame_level,
    install_fake_gpu,
    strip_bytes,
    video_samples,
    write_dataset,
)

from fm_loader import Loader
from fm_loader.media import gpu_decode
from fm_loader.media.decode import decode_strip
from fm_loader.media.errors import CorruptSampleError
from fm_loader.media.format import MediaSample

REFUSED = 4  # a good strip the fake GPU codec refuses (decoded on the CPU instead)
BAD = 7  # a strip whose header reads (the shard writer checks it) but whose pixels do not


def samples(n: int, start: int = 0) -> list[MediaSample]:
    out = video_samples(n, start)
    for i, sample in enumerate(out, start):
        if i == BAD:
            sample.media = sample.media[: sample.media.index(b"\xff\xda") + 14]  # cut after its scan header
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("video-gpu") / "videos"
    write_dataset(folder, "video-text", samples, [13, 9])
    return folder / "manifest.json"


@pytest.fixture
def fake_gpu(monkeypatch) -> list[int]:
    """Loader(device='cuda') runs on the host with the fake codec: resolve to the CPU, transfer by clones."""
    return install_fake_gpu(monkeypatch, {video_samples(1, REFUSED)[0].media})


def run(loader: Loader) -> list[dict]:
    return list(loader)


def test_strips_decode_on_the_gpu_and_a_refused_strip_on_the_cpu_with_the_cpu_paths_pixels() -> None:
    strips = [s.media for s in video_samples(6)]
    width, _, keyframes = VIDEO_SHAPES[0]  # samples 0 and 5 share this shape
    calls: list[int] = []
    decoder = gpu_decode.GpuImageDecoder(torch.device("cpu"), fake_codec(calls, {strips[5]}))
    frames, failed = decoder.decode_strips([strips[0], None, strips[5]], keyframes, (40, 56))
    assert frames.shape == (3, keyframes, 3, 40, 56) and not failed and int(frames[1].sum()) == 0
    assert decoder.cpu_fallbacks == 1  # strip 5, refused by the codec
    on_cpu = torch.from_numpy(decode_strip(strips[5], keyframes, 40, 56).transpose(0, 3, 1, 2).copy())
    assert torch.equal(frames[2], on_cpu)  # the fallback is the CPU path itself
    gpu_levels = frames[0].float().mean(dim=(1, 2, 3))
    assert torch.allclose(
        gpu_levels, torch.tensor([float(frame_level(0, f)) for f in range(keyframes)]), atol=3
    )
    three = strip_bytes(width, 50, [10, 20, 30])  # 150 rows: not 4 frames of equal height
    _, failed = decoder.decode_strips([three], keyframes, (40, 56))
    assert "does not hold 4 frames" in failed[0]


@pytest.mark.parametrize("workers", [0, 2])
def test_gpu_path_matches_the_cpu_path_except_pixels(dataset, fake_gpu, workers) -> None:
    cpu = run(Loader(dataset, 4, seed=1, skip_corrupt=True))
    gpu_loader = Loader(dataset, 4, seed=1, skip_corrupt=True, device="cuda", num_workers=workers)
    assert gpu_loader.image_decode_mode == "gpu"
    gpu = run(gpu_loader)
    assert fake_gpu  # the codec was used
    assert len(cpu) == len(gpu)
    refused_seen = False
    for a, b in zip(cpu, gpu, strict=True):
        assert list(a) == list(b)  # the same keys in the same order
        for key in ("valid", "sample_ids", "caption_ids", "caption_mask", "frame_mask", "bucket"):
            assert torch.equal(a[key], b[key]), key
        assert a["text"] == b["text"] and a["frames"].shape == b["frames"].shape
        assert (a["frames"].float() - b["frames"].float()).abs().mean() < 12
        for slot, text in enumerate(a["text"]):
            if text == f"clip {REFUSED}":
                assert torch.equal(a["frames"][slot], b["frames"][slot])
                refused_seen = True
    assert refused_seen
    assert gpu_loader.metrics()["corrupt_samples_skipped"] == 1  # the bad strip, as on the CPU


def test_gpu_path_raises_the_cpu_paths_corrupt_sample_error(dataset, fake_gpu) -> None:
    with pytest.raises(CorruptSampleError) as on_cpu:
        list(Loader(dataset, 4, seed=1))
    with pytest.raises(CorruptSampleError) as on_gpu:
        list(Loader(dataset, 4, seed=1, device="cuda", image_decode="gpu"))
    assert (on_gpu.value.shard, on_gpu.value.row, on_gpu.value.key) == (
        on_cpu.value.shard,
        on_cpu.value.row,
        on_cpu.value.key,
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback of a machine without CUDA")
def test_without_a_gpu_auto_gives_the_cpu_paths_frames(dataset) -> None:
    plain = run(Loader(dataset, 4, seed=2, skip_corrupt=True))
    auto = Loader(dataset, 4, seed=2, skip_corrupt=True, device="auto", image_decode="auto")
    assert auto.image_decode_mode == "cpu"
    for a, b in zip(plain, run(auto), strict=True):
        assert list(a) == list(b) and torch.equal(a["frames"], b["frames"]) and a["text"] == b["text"]


@pytest.mark.skipif(
    not (torch.cuda.is_available() and gpu_decode.jpeg_codec() is not None),
    reason="needs a CUDA device and torchvision with GPU decode (this machine has neither)",
)
def test_real_nvjpeg_strips_match_the_cpu_path_except_pixels(dataset) -> None:
    cpu = run(Loader(dataset, 4, seed=1, skip_corrupt=True))
    gpu_loader = Loader(dataset, 4, seed=1, skip_corrupt=True, device="cuda")
    assert gpu_loader.image_decode_mode == "gpu"
    for a, b in zip(cpu, run(gpu_loader), strict=True):
        assert torch.equal(a["valid"], b["valid"].cpu()) and b["frames"].is_cuda
        assert (a["frames"].float() - b["frames"].cpu().float()).abs().mean() < 12
