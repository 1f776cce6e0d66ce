"""The versioned image normalization policy: resize (shorter side to S, long side capped) and re-encode.

Output bytes are a pure function of the input bytes, the policy and the Pillow build (its libjpeg-
turbo / zlib versions), which ``config()`` records so a library upgrade changes the stage key.
Encoding is pinned: baseline JPEG, 4:2:0 chroma subsampling, no EXIF/ICC/comments, no optimise pass.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from typing import Any

import PIL
from PIL import Image

from fm_assets.transforms.image.decode import DEFAULT_MAX_PIXELS, decode_image, probe_image
from fm_assets.transforms.media_errors import ENCODE_FAILED, MediaError, error_text

_RESAMPLE = {
    "lanczos": Image.Resampling.LANCZOS,
    "bicubic": Image.Resampling.BICUBIC,
    "bilinear": Image.Resampling.BILINEAR,
}
_FORMATS = ("jpeg", "png")


@dataclass(frozen=True)
class ImageResizePolicy:
    """Shorter side scaled to ``shorter_side`` (never up unless ``upscale``), long side at most ``max_long_side``."""

    version: str = "image-resize-v1"
    shorter_side: int = 384
    max_long_side: int = 1024
    format: str = "jpeg"
    quality: int = 90
    resample: str = "lanczos"
    upscale: bool = False

    def __post_init__(self) -> None:
        if self.format not in _FORMATS:
            raise ValueError(f"format must be one of {_FORMATS}, got {self.format!r}")
        if self.resample not in _RESAMPLE:
            raise ValueError(f"resample must be one of {sorted(_RESAMPLE)}, got {self.resample!r}")
        if not 0 < self.shorter_side <= self.max_long_side:
            raise ValueError("need 0 < shorter_side <= max_long_side")
        if not 1 <= self.quality <= 95:
            raise ValueError("quality must be in 1..95")

    def config(self) -> dict[str, Any]:
        return {**asdict(self), "pillow": PIL.__version__}

    def target_size(self, width: int, height: int) -> tuple[int, int]:
        """The output size for an input of ``width`` x ``height`` (aspect ratio kept, each side >= 1)."""
        short, long = min(width, height), max(width, height)
        scale = self.shorter_side / short
        if scale > 1 and not self.upscale:
            scale = 1.0
        scale = min(scale, self.max_long_side / long)
        if scale == 1.0:
            return width, height
        return max(1, round(width * scale)), max(1, round(height * scale))


@dataclass(frozen=True)
class NormalizedImage:
    data: bytes
    width: int
    height: int
    format: str  # "jpeg" or "png"


def encode_image(image: Image.Image, format: str, quality: int) -> bytes:
    """Deterministic encoding of an RGB image (no metadata, fixed encoder settings)."""
    buffer = io.BytesIO()
    try:
        if format == "jpeg":
            image.save(buffer, "JPEG", quality=quality, subsampling=2, optimize=False, progressive=False)
        else:
            image.save(buffer, "PNG", compress_level=6, optimize=False)
    except (OSError, ValueError) as exc:
        raise MediaError(ENCODE_FAILED, {"format": format, "error": error_text(exc)}) from None
    return buffer.getvalue()


def resize_image(image: Image.Image, policy: ImageResizePolicy) -> Image.Image:
    """The decoded image at the policy's target size (the same object when no resize is needed)."""
    size = policy.target_size(*image.size)
    if size == image.size:
        return image
    return image.resize(size, _RESAMPLE[policy.resample])


def normalize_image(
    data: bytes, policy: ImageResizePolicy, max_pixels: int = DEFAULT_MAX_PIXELS
) -> NormalizedImage:
    """Decode, resize and re-encode per ``policy``; ``MediaError`` for anything undecodable.

    A large JPEG is decoded at a reduced scale that still covers the target size (libjpeg's DCT
    scaling), then resized to the exact target like any other image.
    """
    info = probe_image(data, max_pixels)
    target = policy.target_size(info.width, info.height)
    image = resize_image(decode_image(data, max_pixels, at_least=target), policy)
    encoded = encode_image(image, policy.format, policy.quality)
    return NormalizedImage(encoded, image.size[0], image.size[1], policy.format)


def thumbnail(image: Image.Image, size: int = 128) -> bytes:
    """A JPEG no larger than ``size`` x ``size`` (aspect ratio kept), for previews and the Lance view."""
    width, height = image.size
    scale = min(1.0, size / max(width, height))
    small = image.resize(
        (max(1, round(width * scale)), max(1, round(height * scale))), Image.Resampling.LANCZOS
    )
    return encode_image(small.convert("RGB"), "jpeg", 85)
