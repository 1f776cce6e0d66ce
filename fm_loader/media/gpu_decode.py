"""JPEG batches decoded on the GPU (nvJPEG through ``torchvision.io.decode_jpeg(device=...)``), fitted to a bucket.

Video-text keyframe strips take the same path (:meth:`GpuImageDecoder.decode_strips`): the strip is one JPEG,
decoded on the GPU, cut into its F frames and each frame fitted like an image; a strip the GPU codec refuses is
decoded on the CPU by :func:`fm_loader.media.decode.decode_strip`, the CPU path's own function (same pixels).

Used by the image-text builder when batches go to a CUDA device (``Loader(device=...)``): workers (or the prefetch
thread) read and checksum the compressed bytes and hand them over; the trainer's process decodes them here on
the copy stream. Each image is cropped to the bucket's aspect ratio around its center with the same box as the
CPU path (:func:`fm_loader.media.decode.center_box`) and resized to the bucket's shape (bilinear, antialiased).

Per sample, bytes that are not a complete JPEG (PNG, a JPEG without its end marker ...) or that the GPU codec
refuses fall back to the CPU decode
(:func:`fm_loader.media.decode.decode_image`); bytes the CPU cannot decode either are reported back, and the
builder turns them into the same ``CorruptSampleError`` / ``skip_corrupt`` outcome as the CPU path. Sample order,
bucket assignment, state and resume do not depend on where images are decoded; **only pixel values may differ**
(the GPU decoder's IDCT and upsampling, the resize kernel, and no DCT-domain downscaling).

torchvision is imported only when this path is chosen; without it (or without CUDA) the CPU path is used and
:func:`select_image_decode` says so in one log line.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from fm_loader.media.decode import center_box, decode_image, decode_strip

logger = logging.getLogger(__name__)

JPEG_MAGIC = b"\xff\xd8\xff"
JPEG_END = b"\xff\xd9"  # the end-of-image marker
END_SLACK = 64  # bytes some writers pad after the end-of-image marker
JpegCodec = Callable[[list[torch.Tensor], torch.device], list[torch.Tensor]]
_warned: set[str] = set()


def is_jpeg(data: bytes | memoryview) -> bool:
    return bytes(data[:3]) == JPEG_MAGIC


def is_complete_jpeg(data: bytes | memoryview) -> bool:
    """A JPEG stream with its end-of-image marker near its end. nvJPEG may decode a truncated baseline JPEG
    without an error (the missing rows come out gray) where the CPU path refuses it, so a stream without the
    marker goes to the CPU path, which decides: the two paths then agree on which samples are corrupt."""
    return is_jpeg(data) and JPEG_END in bytes(data[-END_SLACK:])


def _log_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.info(message)


def jpeg_codec() -> JpegCodec | None:
    """torchvision's batched GPU JPEG decode (RGB output), or None when torchvision is not installed."""
    try:
        from torchvision.io import (  # pyright: ignore[reportMissingImports]
            ImageReadMode,
            decode_jpeg,
        )
    except ImportError:
        return None

    def decode(datas: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        # torchvision allocates the outputs on the caller's current stream but has nvJPEG write them on a
        # private stream that never waits on the caller's (decode_jpegs_cuda.cpp): a block freed on this
        # stream with kernels still queued to read it (the previous batch's resize temporaries) could be
        # overwritten early. Letting this stream drain first makes every block it hands out really free.
        if device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        try:
            out = decode_jpeg(datas, mode=ImageReadMode.RGB, device=device)
        except Exception:
            # a failed call frees its outputs while nvJPEG work queued before the failure may still write
            # them: wait for the whole device before the caching allocator hands them out again
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            raise
        return list(out) if isinstance(out, (list, tuple)) else [out]

    return decode


def _probe(codec: JpegCodec, device: torch.device) -> str | None:
    """Why ``codec`` cannot decode on ``device`` (a tiny JPEG tried once), or None when it can."""
    try:
        from PIL import Image

        buffer = io.BytesIO()
        Image.new("RGB", (16, 8), (200, 30, 90)).save(buffer, format="JPEG")
        data = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        (image,) = codec([data], device)
        if tuple(image.shape) != (3, 8, 16):
            return f"the codec returned shape {tuple(image.shape)} for a 16x8 JPEG"
    except Exception as exc:  # any failure of an optional accelerator path means: use the CPU
        return f"{type(exc).__name__}: {exc}"
    return None


def select_image_decode(mode: str, device: torch.device | None) -> str:
    """Where image-text batches are decoded: ``"cpu"``, ``"gpu"`` or ``"bytes"`` (compressed bytes handed out).

    ``"auto"`` is ``"gpu"`` when batches go to a CUDA device and the GPU codec works there, else ``"cpu"``
    (with one log line saying why when a CUDA device is used without it).

    Raises:
        ValueError: ``mode == "gpu"`` without a device or without a working GPU codec.
    """
    if mode in ("cpu", "bytes"):
        return mode
    if device is None:
        if mode == "gpu":
            raise ValueError(
                "image_decode='gpu' needs batches on a CUDA device: pass device='cuda' (or 'auto')"
            )
        return "cpu"
    codec = jpeg_codec()
    why = "torchvision is not installed" if codec is None else _probe(codec, device)
    if why is None:
        return "gpu"
    if mode == "gpu":
        raise ValueError(f"image_decode='gpu' asked for, but the GPU JPEG codec is unusable: {why}")
    _log_once(f"fm_loader: images are decoded on the CPU: no GPU JPEG decode on {device} ({why})")
    return "cpu"


def fit_on_device(image: torch.Tensor, out_height: int, out_width: int) -> torch.Tensor:
    """Crop ``(3, h, w)`` uint8 to the output's aspect ratio around its center and resize it: ``(3, H, W)`` uint8."""
    _, height, width = image.shape
    left, top, right, bottom = center_box(width, height, out_height, out_width)
    x0, y0 = round(left), round(top)
    x1, y1 = max(x0 + 1, round(right)), max(y0 + 1, round(bottom))
    region = image[:, y0:y1, x0:x1].unsqueeze(0).float()
    resized = torch.nn.functional.interpolate(
        region, size=(out_height, out_width), mode="bilinear", antialias=True, align_corners=False
    )
    return resized.squeeze(0).round_().clamp_(0, 255).to(torch.uint8)


class GpuImageDecoder:
    """Decodes a batch of compressed images on ``device``, JPEGs in one codec call, the rest on the CPU.

    Args:
        device: Where the images are decoded and returned.
        codec: The batched JPEG decode (default: torchvision's, see :func:`jpeg_codec`); tests inject one.
    """

    def __init__(self, device: torch.device, codec: JpegCodec | None = None) -> None:
        self.device = device
        found = codec if codec is not None else jpeg_codec()
        if found is None:
            raise ValueError("GPU image decode needs torchvision (torchvision.io.decode_jpeg)")
        self.codec: JpegCodec = found
        self.cpu_fallbacks = 0  # samples decoded on the CPU (not JPEG, or refused by the GPU codec)

    def _on_cpu(self, data: bytes | memoryview, shape: tuple[int, int]) -> torch.Tensor:
        self.cpu_fallbacks += 1
        pixels = decode_image(data, shape[0], shape[1])  # ValueError when it does not decode
        return torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1))).to(self.device)

    def _gpu(self, datas: list[torch.Tensor]) -> list[torch.Tensor | None]:
        """Decoded images, one codec call for the batch; a sample the codec refuses is None."""
        try:
            return list(self.codec(datas, self.device))
        except Exception:  # the batch failed: find which samples the codec refuses, one at a time
            out: list[torch.Tensor | None] = []
            for data in datas:
                try:
                    out.append(self.codec([data], self.device)[0])
                except Exception:
                    out.append(None)
            return out

    def _decoded(self, payloads: Sequence[bytes | memoryview | None]) -> dict[int, torch.Tensor]:
        """The JPEG payloads the codec decodes, ``(3, h, w)`` on the device by slot (one codec call)."""
        jpeg_slots = [i for i, p in enumerate(payloads) if p is not None and is_complete_jpeg(p)]
        datas = [torch.frombuffer(bytearray(payloads[i]), dtype=torch.uint8) for i in jpeg_slots]  # type: ignore[arg-type]
        decoded = self._gpu(datas) if datas else []
        return {
            slot: image
            for slot, image in zip(jpeg_slots, decoded, strict=True)
            if image is not None and image.dim() == 3 and image.shape[0] == 3
        }

    def decode(
        self, payloads: Sequence[bytes | memoryview | None], shape: tuple[int, int]
    ) -> tuple[torch.Tensor, dict[int, str]]:
        """``(B, 3, H, W)`` uint8 on the device (zeros where a payload is None or fails) and the failures.

        Returns:
            The images, and ``{slot: reason}`` for payloads that decode neither on the GPU nor on the CPU.
        """
        images = torch.zeros((len(payloads), 3, *shape), dtype=torch.uint8, device=self.device)

        def on_device(slot: int, image: torch.Tensor) -> None:
            images[slot] = fit_on_device(image, *shape)

        def on_cpu(slot: int, payload: bytes | memoryview) -> None:
            images[slot] = self._on_cpu(payload, shape)

        return images, self._fill(payloads, on_device, on_cpu)

    def decode_strips(
        self, payloads: Sequence[bytes | memoryview | None], keyframes: int, shape: tuple[int, int]
    ) -> tuple[torch.Tensor, dict[int, str]]:
        """Keyframe strips (F frames stacked vertically in one JPEG): ``(B, F, 3, H, W)`` uint8 on the device,
        each frame fitted as an image, and ``{slot: reason}`` for strips that decode nowhere (or do not hold F
        frames of equal height, which the CPU path refuses too)."""
        frames = torch.zeros((len(payloads), keyframes, 3, *shape), dtype=torch.uint8, device=self.device)

        def on_device(slot: int, strip: torch.Tensor) -> None:
            _, height, width = strip.shape
            if height % keyframes:
                raise ValueError(f"a {width}x{height} strip does not hold {keyframes} frames of equal height")
            frame = height // keyframes
            for i in range(keyframes):
                frames[slot, i] = fit_on_device(strip[:, i * frame : (i + 1) * frame], *shape)

        def on_cpu(slot: int, payload: bytes | memoryview) -> None:
            self.cpu_fallbacks += 1
            pixels = decode_strip(payload, keyframes, *shape)  # ValueError when it does not decode
            frames[slot] = torch.from_numpy(np.ascontiguousarray(pixels.transpose(0, 3, 1, 2))).to(
                self.device
            )

        return frames, self._fill(payloads, on_device, on_cpu)

    def _fill(
        self,
        payloads: Sequence[bytes | memoryview | None],
        on_device: Callable[[int, torch.Tensor], None],
        on_cpu: Callable[[int, bytes | memoryview], None],
    ) -> dict[int, str]:
        """Batch-decode ``payloads`` on the device, place each slot (``on_cpu`` for what the device refused) and
        return ``{slot: reason}`` for the payloads that decode nowhere."""
        failed: dict[int, str] = {}
        by_slot = self._decoded(payloads)
        for slot, payload in enumerate(payloads):
            if payload is None:
                continue
            try:
                decoded = by_slot.get(slot)
                if decoded is not None:
                    on_device(slot, decoded)
                else:
                    on_cpu(slot, payload)
            except ValueError as exc:
                failed[slot] = str(exc)
        return failed


def payloads(batch: dict[str, Any]) -> list[memoryview | None]:
    """The compressed bytes of each sample of a batch built with ``image_decode="bytes"`` (None: no sample)."""
    # .cpu(): a no-op on host batches; a "bytes" batch handed out on a CUDA device cannot be .numpy()'d
    data, offsets = batch["image_bytes"].cpu().numpy(), batch["image_offsets"].tolist()
    valid = batch["valid"].tolist()
    view = memoryview(data)
    return [view[offsets[i] : offsets[i + 1]] if valid[i] else None for i in range(len(valid))]
