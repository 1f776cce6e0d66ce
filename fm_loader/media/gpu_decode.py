"""JPEG batches decoded on the GPU and fitted to a bucket there.

The codec (:func:`choose_jpeg_codec`, the loader's ``jpeg_codec`` option): torchvision's
``decode_jpeg(device=...)`` (nvJPEG on the SMs), or NVIDIA nvImageCodec (which can use the hardware JPEG engines
of an A100/H100/H200, but measured slower on an H200: docs/gpu.md). Video-text keyframe strips take the same
path (:meth:`GpuImageDecoder.decode_strips`): the strip is one JPEG, decoded on the GPU, cut into its F frames
and each frame fitted like an image; a strip the GPU codec refuses is decoded on the CPU by
:func:`fm_loader.media.decode.decode_strip`, the CPU path's own function (same pixels).

Used by the image-text builder when batches go to a CUDA device (``Loader(device=...)``): workers (or the prefetch
thread) read and checksum the compressed bytes and hand them over; the trainer's process decodes them here on
the copy stream. The whole batch is then cropped to the bucket's aspect ratio around each image's center (the
CPU path's box, :func:`fm_loader.media.decode.center_box`) and resized to the bucket's shape in one batched,
area-averaging fit (:func:`fit_batch_on_device`).

Per sample, bytes that are not a complete JPEG (PNG, a JPEG without its end marker ...) or that the GPU codec
refuses fall back to the CPU decode
(:func:`fm_loader.media.decode.decode_image`); bytes the CPU cannot decode either are reported back, and the
builder turns them into the same ``CorruptSampleError`` / ``skip_corrupt`` outcome as the CPU path. Sample order,
bucket assignment, state and resume do not depend on where images are decoded; **only pixel values may differ**
(the GPU decoder's IDCT and upsampling, the resize kernel, and no DCT-domain downscaling).

The codecs are imported only when this path is chosen; without one (or without CUDA) the CPU path is used and
:func:`select_image_decode` says so in one log line.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fm_loader.media.decode import center_box, decode_image, decode_strip
from fm_loader.options import JPEG_CODECS

logger = logging.getLogger(__name__)

JPEG_MAGIC = b"\xff\xd8\xff"
JPEG_END = b"\xff\xd9"  # the end-of-image marker
END_SLACK = 64  # bytes some writers pad after the end-of-image marker
# decoded (3, h, w) uint8 images on the device; None where the codec refused a stream (or it raises)
JpegCodec = Callable[[list[torch.Tensor], torch.device], Sequence[torch.Tensor | None]]
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
        if image is None:
            return "the codec refused a 16x8 JPEG"
        if tuple(image.shape) != (3, 8, 16):
            return f"the codec returned shape {tuple(image.shape)} for a 16x8 JPEG"
    except Exception as exc:  # any failure of an optional accelerator path means: use the CPU
        return f"{type(exc).__name__}: {exc}"
    return None


def nvimgcodec_codec() -> JpegCodec | None:
    """NVIDIA nvImageCodec's batched JPEG decode (RGB), or None when it is not installed. It can decode on the
    GPU's hardware JPEG engines (A100, H100, H200), leaving the SMs to the training step; a stream it cannot
    decode comes back as None (the caller decodes it on the CPU). Measured on an H200 with ~1 MP JPEGs it fed
    a ViT-B/16 step worse than torchvision's decode (docs/gpu.md), so ``"auto"`` tries it second."""
    try:
        from nvidia import nvimgcodec  # pyright: ignore[reportMissingImports]
    except ImportError:
        return None
    params = nvimgcodec.DecodeParams(
        apply_exif_orientation=False,  # the CPU path (PIL) does not rotate either
        color_spec=nvimgcodec.ColorSpec.SRGB,
        allow_any_depth=False,
        sample_format=nvimgcodec.SampleFormat.I_RGB,
    )
    kinds = (
        nvimgcodec.BackendKind.HW_GPU_ONLY,
        nvimgcodec.BackendKind.GPU_ONLY,
        nvimgcodec.BackendKind.HYBRID_CPU_GPU,
    )
    decoders: dict[int, Any] = {}
    held: list[Any] = []  # the last call's streams and images, released once its stream has drained

    def decode(datas: list[torch.Tensor], device: torch.device) -> list[torch.Tensor | None]:
        index = device.index if device.index is not None else torch.cuda.current_device()
        decoder = decoders.get(index)
        if decoder is None:
            backends = [nvimgcodec.Backend(kind) for kind in kinds]
            decoder = decoders[index] = nvimgcodec.Decoder(device_id=index, backends=backends)
        stream = torch.cuda.current_stream(device)
        stream.synchronize()  # nothing queued still reads the previous call's images
        held.clear()
        sources = [nvimgcodec.CodeStream(data.numpy()) for data in datas]
        images = decoder.decode(sources, params=params, cuda_stream=stream.cuda_stream)
        held.extend([sources, images])
        # (h, w, 3) views of the decoded images (each keeps its image alive), as (3, h, w)
        return [
            None if image is None else torch.as_tensor(image, device=device).permute(2, 0, 1)
            for image in images
        ]

    return decode


@dataclass(frozen=True)
class CodecChoice:
    """The GPU JPEG codec a loader uses: its name and decode, or None and why no codec can be used."""

    name: str | None
    codec: JpegCodec | None
    why_not: str = ""


# (codec factory, device) pairs whose probe decoded: a loader chooses its decode mode and then builds its
# decoder, and the second choice need not decode the probe JPEG again (failures are probed again)
_PROBED_OK: set[tuple[Callable[[], JpegCodec | None], str]] = set()


def choose_jpeg_codec(preference: str, device: torch.device) -> CodecChoice:
    """The first codec of ``preference`` that decodes a probe JPEG on ``device``: ``"auto"`` tries torchvision
    (nvJPEG on the SMs), then nvImageCodec; a name tries that codec alone."""
    if preference not in JPEG_CODECS:
        raise ValueError(f"jpeg_codec must be one of {JPEG_CODECS}, got {preference!r}")
    names = ("torchvision", "nvimgcodec") if preference == "auto" else (preference,)
    reasons = []
    for name in names:
        factory = nvimgcodec_codec if name == "nvimgcodec" else jpeg_codec  # at call time: tests replace them
        codec = factory()
        package = "nvidia-nvimgcodec" if name == "nvimgcodec" else "torchvision"
        if codec is not None and (factory, str(device)) in _PROBED_OK:
            return CodecChoice(name, codec)
        why = f"{package} is not installed" if codec is None else _probe(codec, device)
        if why is None:
            _PROBED_OK.add((factory, str(device)))
            return CodecChoice(name, codec)
        reasons.append(why)
    return CodecChoice(None, None, "; ".join(reasons))


def select_image_decode(mode: str, device: torch.device | None, jpeg_codec_name: str = "auto") -> str:
    """Where image-text batches are decoded: ``"cpu"``, ``"gpu"`` or ``"bytes"`` (compressed bytes handed out).

    ``"auto"`` is ``"gpu"`` when batches go to a CUDA device and a GPU codec (``jpeg_codec_name``, see
    :func:`choose_jpeg_codec`) works there, else ``"cpu"`` (with one log line saying why when a CUDA device is
    used without one).

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
    why = choose_jpeg_codec(jpeg_codec_name, device).why_not
    if not why:
        return "gpu"
    if mode == "gpu":
        raise ValueError(f"image_decode='gpu' asked for, but the GPU JPEG codec is unusable: {why}")
    _log_once(f"fm_loader: images are decoded on the CPU: no GPU JPEG decode on {device} ({why})")
    return "cpu"


MAX_SUBSAMPLES = 8  # per output pixel and axis: a downscale beyond 8x averages 8x8 of its source pixels
CHUNK_ELEMENTS = 1 << 26  # floats per temporary of one fit call (source batch, sample grid): 256 MB each


def upload(values: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A small host list as a tensor on ``device``, copied without waiting for the device: a plain
    ``torch.tensor(..., device=cuda)`` synchronizes with the stream, which would stall the decode thread
    until the GPU has finished everything queued before it."""
    return torch.tensor(values, dtype=dtype).to(device, non_blocking=True)


def subsamples(height: int, width: int, out_height: int, out_width: int) -> int:
    """Samples per output pixel and axis for an image fitted from ``height`` x ``width``: its downscale factor,
    rounded up (1 when it is enlarged), at most ``MAX_SUBSAMPLES``."""
    left, top, right, bottom = center_box(width, height, out_height, out_width)
    scale = max((right - left) / out_width, (bottom - top) / out_height)
    return max(1, min(MAX_SUBSAMPLES, math.ceil(scale - 1e-6)))


def _axis_samples(
    start: torch.Tensor, stop: torch.Tensor, size: torch.Tensor, out: int, sub: int, padded: int
) -> torch.Tensor:
    """Normalized sample coordinates ``(n, out * sub)`` along one axis: ``sub`` evenly spaced samples inside
    each output pixel's share of ``[start, stop)`` (pixel-edge coordinates), clamped to the image's own
    ``size`` pixels (its edge repeats, as the CPU resize does; the batch's padding gets no weight)."""
    steps = (torch.arange(out * sub, device=start.device, dtype=torch.float32) + 0.5) / sub
    centers = start[:, None] + steps[None, :] * ((stop - start) / out)[:, None] - 0.5
    centers = torch.minimum(centers.clamp_(min=0.0), (size - 1)[:, None])
    return centers * (2.0 / max(padded - 1, 1)) - 1.0


def _fit_chunk(images: Sequence[torch.Tensor], out_height: int, out_width: int, sub: int) -> torch.Tensor:
    """Images that share ``sub`` fitted in one sampling call: ``(n, 3, H, W)`` float."""
    device = images[0].device
    heights = [int(i.shape[1]) for i in images]
    widths = [int(i.shape[2]) for i in images]
    padded_h, padded_w = max(heights), max(widths)
    # zeros, not empty: a sample clamped to an image's last row or column reads the padding past it with
    # weight 0, which must not be NaN or infinite
    source = torch.zeros((len(images), 3, padded_h, padded_w), dtype=torch.float32, device=device)
    for n, image in enumerate(images):
        source[n, :, : heights[n], : widths[n]].copy_(image)  # one kernel each
    boxes = upload(
        [center_box(w, h, out_height, out_width) for h, w in zip(heights, widths, strict=True)],
        torch.float32,
        device,
    )
    sizes = upload([heights, widths], torch.float32, device)
    xs = _axis_samples(boxes[:, 0], boxes[:, 2], sizes[1], out_width, sub, padded_w)
    ys = _axis_samples(boxes[:, 1], boxes[:, 3], sizes[0], out_height, sub, padded_h)
    grid = torch.stack(
        (
            xs[:, None, :].expand(-1, ys.shape[1], -1),
            ys[:, :, None].expand(-1, -1, xs.shape[1]),
        ),
        dim=-1,
    )
    sampled = torch.nn.functional.grid_sample(
        source, grid, mode="bilinear", padding_mode="border", align_corners=True
    )
    return torch.nn.functional.avg_pool2d(sampled, sub) if sub > 1 else sampled


def _chunks(
    members: list[int], images: Sequence[torch.Tensor], out_height: int, out_width: int, sub: int
) -> Iterator[list[int]]:
    """``members`` (indexes of ``images``) in order, cut so that no temporary of a fit call (the padded source
    batch, the sample grid) holds more than ``CHUNK_ELEMENTS`` floats; at least one image per chunk."""
    chunk: list[int] = []
    tallest = widest = 0
    per_image_grid = 2 * out_height * out_width * sub * sub
    for n in members:
        h, w = int(images[n].shape[1]), int(images[n].shape[2])
        grown = (len(chunk) + 1) * max(3 * max(tallest, h) * max(widest, w), per_image_grid)
        if chunk and grown > CHUNK_ELEMENTS:
            yield chunk
            chunk, tallest, widest = [], 0, 0
        chunk.append(n)
        tallest, widest = max(tallest, h), max(widest, w)
    if chunk:
        yield chunk


def fit_batch_on_device(
    images: Sequence[torch.Tensor],
    out_height: int,
    out_width: int,
    out: torch.Tensor | None = None,
    rows: Sequence[int] | None = None,
) -> torch.Tensor:
    """Crop each ``(3, h, w)`` uint8 image to the output's aspect ratio around its center (the CPU path's box,
    :func:`fm_loader.media.decode.center_box`, not rounded) and resize it: ``(N, 3, H, W)`` uint8, or image
    ``i`` written into ``out[rows[i]]`` when ``out`` is given (a batch with other rows filled elsewhere).

    Each output pixel is the mean of ``s x s`` bilinear samples spread over its share of the box (``s``: the
    image's downscale factor rounded up, see :func:`subsamples`): an area-averaging downscale that does not
    alias, and plain bilinear when enlarging. The whole batch takes one copy per image and a handful of
    batched kernels (images with the same ``s`` are sampled together, in chunks of bounded memory), where a
    resize per image costs several kernels and Python calls per image. A pixel depends only on its own image.
    """
    if out is None:
        out = torch.empty((len(images), 3, out_height, out_width), dtype=torch.uint8, device=images[0].device)
    destination = list(rows) if rows is not None else list(range(len(images)))
    by_sub: dict[int, list[int]] = {}
    for n, image in enumerate(images):
        by_sub.setdefault(subsamples(image.shape[1], image.shape[2], out_height, out_width), []).append(n)
    for sub, members in sorted(by_sub.items()):
        for chunk in _chunks(members, images, out_height, out_width, sub):
            fitted = _fit_chunk([images[i] for i in chunk], out_height, out_width, sub)
            rounded = fitted.add_(0.5).clamp_(0, 255).to(torch.uint8)
            out.index_copy_(0, upload([destination[i] for i in chunk], torch.int64, out.device), rounded)
    return out


class GpuImageDecoder:
    """Decodes a batch of compressed images on ``device``, JPEGs in one codec call, the rest on the CPU.

    Args:
        device: Where the images are decoded and returned.
        codec: The batched JPEG decode; None: the one :func:`choose_jpeg_codec` picks for ``preference``.
        preference: ``"auto"``, ``"nvimgcodec"`` or ``"torchvision"`` (used when ``codec`` is None).
    """

    def __init__(
        self, device: torch.device, codec: JpegCodec | None = None, preference: str = "auto"
    ) -> None:
        self.device = device
        self.codec_name = "injected"
        if codec is None:
            choice = choose_jpeg_codec(preference, device)
            if choice.codec is None:
                raise ValueError(f"GPU image decode has no usable JPEG codec: {choice.why_not}")
            codec, self.codec_name = choice.codec, str(choice.name)
        self.codec: JpegCodec = codec
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
        # a copy each: the codec's host-to-device copy may still read it after the batch's buffers are reused
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
        on_device, to_cpu, failed = self._split(payloads, lambda image: [image])
        for slot, payload in to_cpu.items():
            try:
                images[slot] = self._on_cpu(payload, shape)
            except ValueError as exc:
                failed[slot] = str(exc)
        if on_device:
            slots = list(on_device)
            fit_batch_on_device([on_device[s][0] for s in slots], *shape, out=images, rows=slots)
        return images, failed

    def decode_strips(
        self, payloads: Sequence[bytes | memoryview | None], keyframes: int, shape: tuple[int, int]
    ) -> tuple[torch.Tensor, dict[int, str]]:
        """Keyframe strips (F frames stacked vertically in one JPEG): ``(B, F, 3, H, W)`` uint8 on the device,
        each frame fitted as an image, and ``{slot: reason}`` for strips that decode nowhere (or do not hold F
        frames of equal height, which the CPU path refuses too)."""
        frames = torch.zeros((len(payloads), keyframes, 3, *shape), dtype=torch.uint8, device=self.device)

        def cut(strip: torch.Tensor) -> list[torch.Tensor]:
            _, height, width = strip.shape
            if height % keyframes:
                raise ValueError(f"a {width}x{height} strip does not hold {keyframes} frames of equal height")
            frame = height // keyframes
            return [strip[:, i * frame : (i + 1) * frame] for i in range(keyframes)]

        on_device, to_cpu, failed = self._split(payloads, cut)
        for slot, payload in to_cpu.items():
            self.cpu_fallbacks += 1
            try:
                pixels = decode_strip(payload, keyframes, *shape)  # ValueError when it does not decode
            except ValueError as exc:
                failed[slot] = str(exc)
                continue
            frames[slot] = torch.from_numpy(np.ascontiguousarray(pixels.transpose(0, 3, 1, 2))).to(
                self.device
            )
        if on_device:
            slots = list(on_device)
            rows = [slot * keyframes + i for slot in slots for i in range(keyframes)]
            flat = frames.view(len(payloads) * keyframes, 3, *shape)
            fit_batch_on_device([f for s in slots for f in on_device[s]], *shape, out=flat, rows=rows)
        return frames, failed

    def _split(
        self,
        payloads: Sequence[bytes | memoryview | None],
        cut: Callable[[torch.Tensor], list[torch.Tensor]],
    ) -> tuple[dict[int, list[torch.Tensor]], dict[int, bytes | memoryview], dict[int, str]]:
        """Batch-decode ``payloads`` on the device (one codec call). Returns ``{slot: cut(decoded)}`` for what
        the device decoded, ``{slot: payload}`` for what is left to the CPU (refused by the GPU codec, not a
        complete JPEG) and ``{slot: reason}`` for what ``cut`` refused."""
        by_slot = self._decoded(payloads)
        on_device: dict[int, list[torch.Tensor]] = {}
        to_cpu: dict[int, bytes | memoryview] = {}
        failed: dict[int, str] = {}
        for slot, payload in enumerate(payloads):
            if payload is None:
                continue
            decoded = by_slot.get(slot)
            if decoded is None:
                to_cpu[slot] = payload
                continue
            try:
                on_device[slot] = cut(decoded)
            except ValueError as exc:
                failed[slot] = str(exc)
        return on_device, to_cpu, failed


def payloads(batch: dict[str, Any]) -> list[memoryview | None]:
    """The compressed bytes of each sample of a batch built with ``image_decode="bytes"`` (None: no sample)."""
    # .cpu(): a no-op on host batches; a "bytes" batch handed out on a CUDA device cannot be .numpy()'d
    data, offsets = batch["image_bytes"].cpu().numpy(), batch["image_offsets"].tolist()
    valid = batch["valid"].tolist()
    view = memoryview(data)
    return [view[offsets[i] : offsets[i + 1]] if valid[i] else None for i in range(len(valid))]
