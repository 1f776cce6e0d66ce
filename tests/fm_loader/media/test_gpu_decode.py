"""The GPU image decode path, run on the CPU with an injected JPEG codec: selection, per-sample CPU fallback,
the same CorruptSampleError / skip_corrupt outcome and the same order, buckets, captions and state as the CPU
path (pixels close, not equal); the real nvJPEG path where CUDA and torchvision exist."""

from __future__ import annotations

import logging

import pytest
import torch
from media_shards import fake_codec, image_samples, install_fake_gpu, write_dataset

from fm_loader import DeliveryOptions, Loader
from fm_loader.media import gpu_decode
from fm_loader.media.errors import CorruptSampleError
from fm_loader.media.format import MediaSample

BAD_JPEG, BAD_PNG = 3, 9  # sample indexes whose bytes pass their checksum but do not decode
REFUSED = 6  # a good JPEG the fake GPU codec refuses (decoded on the CPU instead)


def refused_bytes() -> set[bytes]:
    return {image_samples(1, REFUSED)[0].media}


def samples(n: int, start: int = 0) -> list[MediaSample]:
    out = image_samples(n, start)
    for i, s in enumerate(out):
        if start + i in (
            BAD_JPEG,
            BAD_PNG,
        ):  # the header reads (the shard writer checks it), the pixels do not
            out[i] = MediaSample(s.key, s.media[: len(s.media) // 3], s.media_ext, s.text, s.meta)
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu-decode") / "images"
    write_dataset(folder, "image-text", samples, [14, 10])
    return folder / "manifest.json"


@pytest.fixture
def fake_gpu(monkeypatch) -> list[int]:
    """Loader(device='cuda') runs on the host with the fake codec: resolve to the CPU, transfer by clones."""
    return install_fake_gpu(monkeypatch, refused_bytes())


def test_selection() -> None:
    select = gpu_decode.select_image_decode
    assert select("auto", None) == "cpu"
    assert select("cpu", torch.device("cpu")) == "cpu"
    assert select("bytes", None) == "bytes"
    with pytest.raises(ValueError, match="needs batches on a CUDA device"):
        select("gpu", None)


def test_auto_without_the_codec_is_the_cpu_path_with_one_log_line(monkeypatch, caplog) -> None:
    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: None)
    monkeypatch.setattr(gpu_decode, "_warned", set())
    with caplog.at_level(logging.INFO, logger="fm_loader.media.gpu_decode"):
        assert gpu_decode.select_image_decode("auto", torch.device("cpu")) == "cpu"
        assert gpu_decode.select_image_decode("auto", torch.device("cpu")) == "cpu"
    lines = [r for r in caplog.records if "decoded on the CPU" in r.getMessage()]
    assert len(lines) == 1 and "torchvision is not installed" in lines[0].getMessage()
    with pytest.raises(ValueError, match="GPU JPEG codec is unusable: torchvision is not installed"):
        gpu_decode.select_image_decode("gpu", torch.device("cpu"))


def test_a_codec_that_fails_its_probe_is_not_chosen(monkeypatch) -> None:
    def broken(datas, device):
        raise RuntimeError("nvjpeg init failed")

    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: broken)
    monkeypatch.setattr(gpu_decode, "_warned", set())
    assert gpu_decode.select_image_decode("auto", torch.device("cpu")) == "cpu"
    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: fake_codec([], refused_bytes()))
    assert gpu_decode.select_image_decode("auto", torch.device("cpu")) == "gpu"


def test_decoder_batches_jpegs_and_falls_back_per_sample() -> None:
    calls: list[int] = []
    decoder = gpu_decode.GpuImageDecoder(torch.device("cpu"), fake_codec(calls, refused_bytes()))
    batch = [s.media for s in samples(8)]  # 0 and 5 are PNG, 3 is a bad JPEG, 6 is refused by the codec
    batch[7] = None  # padding
    images, failed = decoder.decode(batch, (32, 48))
    assert images.shape == (8, 3, 32, 48) and images.dtype == torch.uint8
    assert list(failed) == [3] and "does not decode" in failed[3]
    assert calls[0] == 4  # the four complete JPEGs in one codec call (it failed: then one by one)
    assert decoder.cpu_fallbacks == 4  # two PNGs, the refused JPEG, the truncated one (not sent to the GPU)
    assert int(images[7].sum()) == 0 and int(images[3].sum()) == 0
    cpu = torch.from_numpy(
        gpu_decode.decode_image(batch[1], 32, 48).transpose(2, 0, 1).copy()  # type: ignore[arg-type]
    )
    assert (images[1].float() - cpu.float()).abs().mean() < 12  # only pixel values may differ, a little


def test_a_truncated_jpeg_a_lenient_codec_would_decode_is_still_refused() -> None:
    """nvJPEG may decode a truncated baseline JPEG without an error; the CPU path refuses it. A codec that
    decodes anything (gray pixels) must not make the GPU path accept what the CPU path calls corrupt."""
    calls: list[int] = []

    def lenient(datas: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        calls.append(len(datas))
        return [torch.full((3, 16, 16), 128, dtype=torch.uint8) for _ in datas]

    decoder = gpu_decode.GpuImageDecoder(torch.device("cpu"), lenient)
    good, truncated = (s.media for s in samples(2, 1))  # 1 is a good JPEG; 2 cut to a third below
    truncated = truncated[: len(truncated) // 3]
    padded = good + b"\0" * 16  # padding after the end marker: still complete
    assert gpu_decode.is_complete_jpeg(good) and gpu_decode.is_complete_jpeg(padded)
    assert gpu_decode.is_jpeg(truncated) and not gpu_decode.is_complete_jpeg(truncated)
    _, failed = decoder.decode([good, truncated, padded], (16, 16))
    assert calls == [2] and list(failed) == [1]


def run(loader: Loader) -> list[tuple[dict, dict]]:
    out = []
    for batch in loader:
        out.append((batch, loader.state_dict()))
    return out


@pytest.mark.parametrize("workers", [0, 2])
def test_gpu_path_matches_the_cpu_path_except_pixels(dataset, fake_gpu, workers) -> None:
    cpu = run(Loader(dataset, 4, seed=1, skip_corrupt=True))
    gpu_loader = Loader(dataset, 4, seed=1, skip_corrupt=True, device="cuda", num_workers=workers)
    assert gpu_loader.image_decode_mode == "gpu"
    gpu = run(gpu_loader)
    assert fake_gpu  # the codec was used
    assert len(cpu) == len(gpu)
    for (a, sa), (b, sb) in zip(cpu, gpu, strict=True):
        assert sa == sb and list(a) == list(b)
        for key in ("valid", "sample_ids", "caption_ids", "caption_mask", "bucket"):
            assert torch.equal(a[key], b[key]), key
        assert a["text"] == b["text"]
        assert a["images"].shape == b["images"].shape
        assert (a["images"].float() - b["images"].float()).abs().mean() < 12
    m_cpu, m_gpu = Loader(dataset, 4, seed=1, skip_corrupt=True), gpu_loader
    for _ in m_cpu:
        pass
    for key in ("samples", "caption_tokens", "corrupt_samples_skipped"):
        assert m_gpu.metrics()[key] == m_cpu.metrics()[key] > 0, key


def test_gpu_path_raises_the_cpu_paths_corrupt_sample_error(dataset, fake_gpu) -> None:
    cpu_loader = Loader(dataset, 4, seed=1)
    gpu_loader = Loader(dataset, 4, seed=1, device="cuda", image_decode="gpu", device_prefetch=3)
    with pytest.raises(CorruptSampleError) as on_cpu:
        list(cpu_loader)
    with pytest.raises(CorruptSampleError) as on_gpu:
        list(gpu_loader)
    # raised when the trainer reaches the batch, not while the device path looks ahead: the same position
    assert gpu_loader.state_dict() == cpu_loader.state_dict()
    assert gpu_loader.state_dict()["batches_emitted"] > 0
    assert (on_gpu.value.shard, on_gpu.value.row, on_gpu.value.key) == (
        on_cpu.value.shard,
        on_cpu.value.row,
        on_cpu.value.key,
    )
    assert "re-shard this sample" in str(on_gpu.value)


def test_bytes_mode_hands_out_the_checksummed_compressed_bytes(dataset) -> None:
    batch = next(iter(Loader(dataset, 4, seed=1, image_decode="bytes", skip_corrupt=True)))
    assert "images" not in batch
    chunks = gpu_decode.payloads(batch)
    assert len(chunks) == 4 and all(c is None or len(c) > 8 for c in chunks)


def test_a_codec_is_probed_once_per_device_then_trusted(monkeypatch) -> None:
    probes: list[str] = []
    real_probe = gpu_decode._probe

    def counted(codec, device):
        probes.append(str(device))
        return real_probe(codec, device)

    monkeypatch.setattr(gpu_decode, "_probe", counted)
    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: fake_codec([], set()))
    cpu = torch.device("cpu")
    assert gpu_decode.select_image_decode("auto", cpu) == "gpu"  # what a loader does first
    assert gpu_decode.GpuImageDecoder(cpu).codec_name == "torchvision"  # then, for its first batch
    assert probes == ["cpu"]


def test_auto_prefers_torchvision_then_nvimgcodec(monkeypatch) -> None:
    cpu = torch.device("cpu")
    hardware, kernels = fake_codec([], set()), fake_codec([], set())
    monkeypatch.setattr(gpu_decode, "nvimgcodec_codec", lambda: hardware)
    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: kernels)
    assert gpu_decode.choose_jpeg_codec("auto", cpu).codec is kernels
    assert gpu_decode.choose_jpeg_codec("nvimgcodec", cpu).codec is hardware
    assert gpu_decode.GpuImageDecoder(cpu).codec_name == "torchvision"
    assert gpu_decode.GpuImageDecoder(cpu, preference="nvimgcodec").codec_name == "nvimgcodec"
    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: lambda datas, device: [None] * len(datas))
    choice = gpu_decode.choose_jpeg_codec("auto", cpu)  # refuses the probe JPEG: the next one
    assert (choice.name, choice.codec) == ("nvimgcodec", hardware)
    assert "refused" in gpu_decode.choose_jpeg_codec("torchvision", cpu).why_not
    monkeypatch.setattr(gpu_decode, "nvimgcodec_codec", lambda: None)
    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: None)
    assert gpu_decode.choose_jpeg_codec("auto", cpu).why_not == (
        "torchvision is not installed; nvidia-nvimgcodec is not installed"
    )
    with pytest.raises(ValueError, match="jpeg_codec must be one of"):
        gpu_decode.choose_jpeg_codec("nvjpeg", cpu)
    with pytest.raises(ValueError, match="jpeg_codec must be one of"):
        DeliveryOptions(jpeg_codec="nvjpeg")


def test_a_stream_the_codec_returns_as_none_is_decoded_on_the_cpu() -> None:
    """nvImageCodec answers a stream it cannot decode with None (torchvision raises): the CPU decodes it."""
    refused = refused_bytes()
    strict = fake_codec([], set())

    def codec(datas, device):
        return [None if bytes(d.numpy()) in refused else strict([d], device)[0] for d in datas]

    decoder = gpu_decode.GpuImageDecoder(torch.device("cpu"), codec)
    batch = [s.media for s in image_samples(8)]
    images, failed = decoder.decode(batch, (32, 48))
    assert not failed and decoder.cpu_fallbacks == 3  # the PNGs 0 and 5 (never sent) and the refused JPEG
    cpu = torch.from_numpy(gpu_decode.decode_image(batch[REFUSED], 32, 48).transpose(2, 0, 1).copy())
    assert torch.equal(images[REFUSED], cpu)  # decoded by the CPU path itself: same pixels


def real_codec(name: str) -> bool:
    return (
        torch.cuda.is_available()
        and gpu_decode.choose_jpeg_codec(name, torch.device("cuda")).codec is not None
    )


@pytest.mark.parametrize("codec", ["torchvision", "nvimgcodec"])
def test_real_gpu_codec_matches_the_cpu_path_except_pixels(dataset, codec) -> None:
    if not real_codec(codec):
        pytest.skip(f"needs a CUDA device and a working {codec} JPEG decode (this machine has neither)")
    cpu = run(Loader(dataset, 4, seed=1, skip_corrupt=True))
    gpu = run(Loader(dataset, 4, seed=1, skip_corrupt=True, device="cuda", jpeg_codec=codec))
    for (a, sa), (b, sb) in zip(cpu, gpu, strict=True):
        assert sa == sb and torch.equal(a["valid"], b["valid"].cpu())
        assert b["images"].is_cuda
        assert (a["images"].float() - b["images"].cpu().float()).abs().mean() < 12


def fake_torchvision(monkeypatch, decode_jpeg) -> None:
    """``torchvision.io`` with ``decode_jpeg`` replaced (this machine has no torchvision)."""
    import enum
    import sys
    import types

    io_module = types.ModuleType("torchvision.io")
    io_module.ImageReadMode = enum.Enum("ImageReadMode", "UNCHANGED GRAY RGB")  # type: ignore[attr-defined]
    io_module.decode_jpeg = decode_jpeg  # type: ignore[attr-defined]
    package = types.ModuleType("torchvision")
    package.io = io_module  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision", package)
    monkeypatch.setitem(sys.modules, "torchvision.io", io_module)


def test_the_torchvision_codec_drains_the_callers_stream_before_nvjpeg_writes(monkeypatch) -> None:
    """torchvision's CUDA decode allocates its outputs on the caller's stream and writes them from a stream of
    its own that does not wait on the caller's: the codec lets the caller's stream finish first, and after a
    failed call waits for the device before the freed outputs can be handed out again."""
    events: list[str] = []

    class Stream:
        def synchronize(self) -> None:
            events.append("stream drained")

    def decode_jpeg(datas, mode, device):
        assert isinstance(datas, list) and mode.name == "RGB" and device.type == "cuda"
        events.append(f"decode {len(datas)}")
        if any(bytes(d[:2].tolist()) != b"\xff\xd8" for d in datas):
            raise RuntimeError("Error while decoding JPEG images: Failed to get image info: 2")
        return [torch.zeros((3, 2, 2), dtype=torch.uint8) for _ in datas]

    fake_torchvision(monkeypatch, decode_jpeg)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append("device synchronized"))
    codec = gpu_decode.jpeg_codec()
    assert codec is not None
    good = torch.tensor([0xFF, 0xD8, 0xFF, 0xE0], dtype=torch.uint8)
    assert len(codec([good, good], torch.device("cuda"))) == 2
    assert events == ["stream drained", "decode 2"]
    events.clear()
    with pytest.raises(RuntimeError, match="Error while decoding JPEG images"):
        codec([good, torch.tensor([1, 2, 3], dtype=torch.uint8)], torch.device("cuda"))
    assert events == ["stream drained", "decode 2", "device synchronized"]
    # and the decoder then finds the refused sample one by one, the good one still decoded on the "GPU"
    events.clear()
    decoder = gpu_decode.GpuImageDecoder(torch.device("cuda"), codec)
    decoded = decoder._gpu([good, torch.tensor([1, 2, 3], dtype=torch.uint8)])
    assert decoded[0] is not None and decoded[1] is None
