"""Builders of image-text and audio-text shards from generated images and clips (PIL, numpy, soundfile)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile
import torch
from PIL import Image

from fm_loader.media.format import MediaSample, encode_media_shard
from fm_loader.media.manifest import MediaManifest, MediaShardEntry

# (width, height) of the generated images: square, portrait and landscape, some far off any bucket's ratio
IMAGE_SIZES = [(64, 64), (48, 96), (96, 48), (80, 60), (60, 80), (120, 40), (40, 100), (72, 54), (90, 50)]


def image_bytes(width: int, height: int, seed: int, ext: str = "jpg") -> bytes:
    """A deterministic image: a gradient plus seeded noise, so every sample decodes differently."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], axis=-1)
    pixels = (pixels + rng.integers(0, 32, pixels.shape)).clip(0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG" if ext == "jpg" else "PNG", quality=90)
    return out.getvalue()


def audio_bytes(
    frames: int, seed: int, ext: str = "wav", sample_rate: int = 16000, channels: int = 1
) -> bytes:
    """A deterministic 16-bit clip: a seeded-frequency sine."""
    t = np.arange(frames) / sample_rate
    wave = 0.5 * np.sin(2 * np.pi * (220 + 20 * seed) * t)
    data = np.repeat(wave[:, None], channels, axis=1) if channels > 1 else wave
    out = io.BytesIO()
    soundfile.write(out, data, sample_rate, format=ext.upper(), subtype="PCM_16")
    return out.getvalue()


def meta(i: int, **more: object) -> dict:
    return {"licence": "cc-by-4.0", "provenance": {"source": "generated", "index": i}, **more}


def image_samples(n: int, start: int = 0, tokens: bool = True) -> list[MediaSample]:
    out = []
    for i in range(start, start + n):
        width, height = IMAGE_SIZES[i % len(IMAGE_SIZES)]
        ext = "png" if i % 5 == 0 else "jpg"
        caption = f"image {i} of {width}x{height}"
        extra = {"caption_tokens": [i % 1000, *range(1 + i % 7)]} if tokens else {}
        out.append(
            MediaSample(f"img{i:06d}", image_bytes(width, height, i, ext), ext, caption, meta(i, **extra))
        )
    return out


def audio_samples(n: int, start: int = 0) -> list[MediaSample]:
    out = []
    for i in range(start, start + n):
        frames = 800 + 137 * (i % 11)
        ext = "flac" if i % 3 == 0 else "wav"
        out.append(MediaSample(f"clip{i:06d}", audio_bytes(frames, i, ext), ext, f"transcript {i}", meta(i)))
    return out


def write_dataset(
    folder: Path,
    modality: str,
    make: Callable[[int, int], list[MediaSample]],
    shard_sizes: list[int],
    **manifest_fields: object,
) -> MediaManifest:
    """Encode shards of the given sizes into ``folder`` and save ``folder/manifest.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    entries, start = [], 0
    for s, size in enumerate(shard_sizes):
        enc = encode_media_shard(make(size, start), f"shard-{s:06d}")
        for name, data in enc.files.items():
            (folder / name).write_bytes(data)
        entries.append(MediaShardEntry.from_info(enc.info))
        start += size
    fields = {"name": folder.name, "version": "v1", "code_version": "test", **manifest_fields}
    manifest = MediaManifest(modality=modality, shards=entries, **fields)  # type: ignore[arg-type]
    manifest.save(str(folder / "manifest.json"))
    return manifest


# (width, height, keyframes) of the generated video clips: two frame counts, three aspect ratios
VIDEO_SHAPES = [(64, 48, 4), (48, 64, 4), (96, 48, 3), (64, 48, 3), (80, 48, 4)]


def frame_level(sample: int, frame: int) -> int:
    """The grey level of keyframe ``frame`` of clip ``sample``: tells frames and samples apart after decoding."""
    return 16 + (sample * 37 + frame * 53) % 224


def strip_bytes(width: int, height: int, levels: list[int]) -> bytes:
    """A keyframe strip: one flat grey frame per level, stacked vertically, as one JPEG."""
    pixels = np.concatenate([np.full((height, width, 3), level, np.uint8) for level in levels])
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=95)
    return out.getvalue()


def video_samples(n: int, start: int = 0) -> list[MediaSample]:
    out = []
    for i in range(start, start + n):
        width, height, keyframes = VIDEO_SHAPES[i % len(VIDEO_SHAPES)]
        levels = [frame_level(i, f) for f in range(keyframes)]
        extra = {"caption_tokens": [i % 1000, 7], "keyframes": keyframes}
        out.append(
            MediaSample(
                f"vid{i:06d}", strip_bytes(width, height, levels), "strip.jpg", f"clip {i}", meta(i, **extra)
            )
        )
    return out


def fake_codec(
    calls: list[int], refused: set[bytes]
) -> Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]]:
    """A batched 'GPU' JPEG decode on the CPU (PIL): (3, h, w) uint8; counts its batches in ``calls`` and
    refuses the ``refused`` streams."""

    def decode(datas: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        calls.append(len(datas))
        out = []
        for data in datas:
            raw = bytes(data.numpy())
            if raw in refused:
                raise RuntimeError("codec refuses this stream")
            with Image.open(io.BytesIO(raw)) as image:  # garbage raises, as nvJPEG does
                out.append(torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1).contiguous())
        return out

    return decode


def install_fake_gpu(monkeypatch, refused: set[bytes]) -> list[int]:
    """Loader(device='cuda') runs on the host with :func:`fake_codec`: resolve to the CPU, transfer by clones.
    Returns the list the codec records its batch sizes in."""
    import fm_loader.loader as loader_module
    from fm_loader.device import HostTransfer
    from fm_loader.media import gpu_decode

    calls: list[int] = []
    real = loader_module.resolve_device
    monkeypatch.setattr(loader_module, "resolve_device", lambda d: torch.device("cpu") if d else real(d))
    monkeypatch.setattr(loader_module.Loader, "_transfer", lambda self, device: HostTransfer())
    monkeypatch.setattr(gpu_decode, "jpeg_codec", lambda: fake_codec(calls, refused))
    return calls
