"""Image probing and decoding with Pillow, refusing bad input with a ``MediaError`` reason code.

Decoder: Pillow (libjpeg-turbo, libpng/zlib, libwebp bundled in its wheels): one dependency that
reads every format we accept, byte-identical across machines with the same wheel. ``probe_image``
reads only the header, so a decompression bomb (a small file that claims billions of pixels) is
refused before any pixel is allocated. ``decode_image`` loads every pixel and fails on truncated
data instead of padding it with grey (Pillow's ``LOAD_TRUNCATED_IMAGES`` stays off; it is checked).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

from PIL import Image, ImageFile, ImageOps, UnidentifiedImageError

from fm_assets.transforms.media_errors import (
    CORRUPT_IMAGE,
    DECOMPRESSION_BOMB,
    INVALID_DIMENSIONS,
    NOT_AN_IMAGE,
    TRUNCATED_IMAGE,
    UNSUPPORTED_FORMAT,
    MediaError,
    error_text,
)

# Pillow format names we decode; everything else Pillow can identify is refused as unsupported
# (EPS would run Ghostscript, ICO/PSD/etc. are not training images).
SUPPORTED_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")
DEFAULT_MAX_PIXELS = 64_000_000
_TRUNCATION_MARKERS = ("truncated", "premature end", "broken data stream", "unexpected end")


@dataclass(frozen=True)
class ImageInfo:
    """What the header says: ``format`` in lower case ("jpeg", "png", ...), size and Pillow mode."""

    format: str
    width: int
    height: int
    mode: str


def open_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """The image with its header read and checked (format, size against ``max_pixels``), pixels not loaded."""
    if not data:
        raise MediaError(NOT_AN_IMAGE, {"bytes": 0})
    try:
        with warnings.catch_warnings():
            # The size is checked against max_pixels below; Pillow's own global limit only warns first.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=SUPPORTED_FORMATS)
    except Image.DecompressionBombError as exc:
        raise MediaError(DECOMPRESSION_BOMB, {"max_pixels": max_pixels, "error": error_text(exc)}) from None
    except UnidentifiedImageError:
        raise _unidentified(data) from None
    except Exception as exc:  # Pillow's plugins raise many types on hostile headers; all mean "bad input"
        raise MediaError(CORRUPT_IMAGE, {"error": error_text(exc)}) from None
    width, height = image.size
    if width <= 0 or height <= 0:
        raise MediaError(INVALID_DIMENSIONS, {"width": width, "height": height})
    if width * height > max_pixels:
        raise MediaError(
            DECOMPRESSION_BOMB,
            {"width": width, "height": height, "pixels": width * height, "max_pixels": max_pixels},
        )
    return image


def _unidentified(data: bytes) -> MediaError:
    """Tell "an image in a format we do not take" from "not an image at all"."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = Image.open(io.BytesIO(data))  # header only: no plugin decodes here
            fmt = other.format or "unknown"
    except Exception:
        return MediaError(NOT_AN_IMAGE, {"bytes": len(data), "head": data[:8].hex()})
    return MediaError(
        UNSUPPORTED_FORMAT, {"format": fmt.lower(), "supported": [f.lower() for f in SUPPORTED_FORMATS]}
    )


def probe_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> ImageInfo:
    """Format, size and mode from the header alone; ``MediaError`` for non-images, bombs, other formats."""
    image = open_image(data, max_pixels)
    return ImageInfo(str(image.format).lower(), image.size[0], image.size[1], image.mode)


def decode_image(
    data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS, *, at_least: tuple[int, int] | None = None
) -> Image.Image:
    """Every pixel as an RGB image (first frame of animations, EXIF orientation applied, alpha on white).

    ``at_least`` (width, height as stored, before EXIF rotation): a JPEG may then be decoded at 1/2, 1/4
    or 1/8 scale by libjpeg itself, the smallest one still covering that size; much faster when the
    caller shrinks the image anyway. Other formats ignore it.
    Truncated data raises ``MediaError("truncated_image")``; other decoder failures ``corrupt_image``.
    """
    if ImageFile.LOAD_TRUNCATED_IMAGES:
        # Someone turned on Pillow's global "pad truncated files with grey"; refuse rather than guess.
        raise RuntimeError("PIL.ImageFile.LOAD_TRUNCATED_IMAGES is on; media decoding needs it off")
    image = open_image(data, max_pixels)
    try:
        if at_least is not None and image.format == "JPEG":
            image.draft("RGB", at_least)
        image.load()
        image = ImageOps.exif_transpose(image) or image
        return to_rgb(image)
    except Image.DecompressionBombError as exc:
        raise MediaError(DECOMPRESSION_BOMB, {"max_pixels": max_pixels, "error": error_text(exc)}) from None
    except Exception as exc:  # see decode_failure
        raise decode_failure(exc, image) from None


def decode_failure(exc: Exception, image: Image.Image) -> MediaError:
    """``truncated_image`` when the decoder ran out of data, else ``corrupt_image`` (any exception type:
    decoders and EXIF parsing raise OSError, SyntaxError, ValueError, struct.error, ... on bad bytes)."""
    message = error_text(exc)
    reason = TRUNCATED_IMAGE if any(m in message.lower() for m in _TRUNCATION_MARKERS) else CORRUPT_IMAGE
    return MediaError(reason, {"format": str(image.format).lower(), "error": message})


def to_rgb(image: Image.Image) -> Image.Image:
    """8-bit RGB: transparency composited on white, 16-bit grey scaled down (not clipped)."""
    if image.mode == "RGB":
        return image
    if image.mode in ("I;16", "I;16B", "I;16L", "I;16N"):
        image = image.convert("I")
    if image.mode == "I":
        # 16-bit samples in a 32-bit container: map 0..65535 onto 0..255.
        return image.point(lambda v: v * (1 / 257)).convert("L").convert("RGB")
    if image.mode == "F":
        return image.convert("L").convert("RGB")
    has_alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
    if has_alpha:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")
