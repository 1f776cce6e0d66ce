"""Media bytes -> arrays: images resized and center-cropped to a bucket's shape, audio as mono float32.

Images are cropped to the bucket's aspect ratio around their center and scaled to its shape in one
``Image.resize(box=...)`` call (no intermediate image); JPEGs are first decoded at the smallest DCT scale
(1/2, 1/4, 1/8) that still covers the target (``Image.draft``), which skips most of the decode work for
images much larger than the bucket. EXIF orientation is not applied: the pipeline stores pixels upright.
"""

from __future__ import annotations

import io

import numpy as np

try:
    from PIL import Image
except ImportError:  # pragma: no cover - depends on the install
    Image = None  # type: ignore[assignment]


def _require_pillow() -> None:
    if Image is None:  # pragma: no cover - depends on the install
        raise ImportError("decoding image shards needs Pillow: pip install 'fm-data-platform[media]'")


def center_box(width: int, height: int, out_height: int, out_width: int) -> tuple[float, float, float, float]:
    """The largest region of a ``width`` x ``height`` image with the output's aspect ratio, centered."""
    target = out_width / out_height
    if width / height > target:  # wider than the bucket: cut the sides
        kept = height * target
        left = (width - kept) / 2
        return (left, 0.0, left + kept, float(height))
    kept = width / target  # taller than the bucket: cut top and bottom
    top = (height - kept) / 2
    return (0.0, top, float(width), top + kept)


def decode_image(media: bytes | memoryview, out_height: int, out_width: int) -> np.ndarray:
    """Decode an image and fit it to ``(out_height, out_width)``: crop to that aspect ratio, then resize.

    Args:
        media: JPEG or PNG bytes.
        out_height: Output height in pixels.
        out_width: Output width in pixels.

    Returns:
        ``(out_height, out_width, 3)`` uint8 RGB.

    Raises:
        ValueError: The bytes do not decode.
    """
    _require_pillow()
    assert Image is not None
    try:
        with Image.open(io.BytesIO(media)) as image:
            width, height = image.size
            left, top, right, bottom = center_box(width, height, out_height, out_width)
            scale = min((right - left) / out_width, (bottom - top) / out_height)
            if image.format == "JPEG" and scale >= 2:
                # decode at 1/2^k scale, still at least the region's output size
                image.draft("RGB", (int(width / scale) + 1, int(height / scale) + 1))
                # the reduced sides are rounded up per axis, so each axis scales by its own factor
                fx, fy = image.size[0] / width, image.size[1] / height
                left, right = left * fx, min(right * fx, float(image.size[0]))
                top, bottom = top * fy, min(bottom * fy, float(image.size[1]))
            rgb = image.convert("RGB")
            fitted = rgb.resize(
                (out_width, out_height), Image.Resampling.BILINEAR, box=(left, top, right, bottom)
            )
            return np.asarray(fitted, dtype=np.uint8)
    except (OSError, SyntaxError, ValueError) as exc:  # what PIL raises for damaged data
        raise ValueError(f"image does not decode ({exc})") from exc


def decode_strip(media: bytes | memoryview, keyframes: int, out_height: int, out_width: int) -> np.ndarray:
    """Decode a video clip's keyframe strip (``keyframes`` frames stacked vertically in one JPEG) and fit each
    frame to ``(out_height, out_width)`` as :func:`decode_image` fits an image.

    Returns:
        ``(keyframes, out_height, out_width, 3)`` uint8 RGB.

    Raises:
        ValueError: The bytes do not decode or the strip's height is not ``keyframes`` equal frames.
    """
    _require_pillow()
    assert Image is not None
    try:
        with Image.open(io.BytesIO(media)) as image:
            rgb = image.convert("RGB")
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"keyframe strip does not decode ({exc})") from exc
    width, height = rgb.size
    if keyframes < 1 or height % keyframes:
        raise ValueError(f"a {width}x{height} strip does not hold {keyframes} frames of equal height")
    frame = height // keyframes
    left, top, right, bottom = center_box(width, frame, out_height, out_width)
    out = np.empty((keyframes, out_height, out_width, 3), dtype=np.uint8)
    for i in range(keyframes):
        box = (left, top + i * frame, right, bottom + i * frame)
        out[i] = np.asarray(rgb.resize((out_width, out_height), Image.Resampling.BILINEAR, box=box))
    return out


def decode_audio(media: bytes | memoryview) -> tuple[np.ndarray, int]:
    """Decode a WAV or FLAC clip to mono float32 in [-1, 1] (channels averaged).

    Returns:
        ``(samples, sample_rate)``.

    Raises:
        ValueError: The bytes do not decode.
        ImportError: soundfile is not installed.
    """
    try:
        import soundfile
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "decoding audio shards needs soundfile: pip install 'fm-data-platform[media]'"
        ) from exc
    try:
        data, rate = soundfile.read(io.BytesIO(bytes(media)), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError, TypeError) as exc:
        raise ValueError(f"audio does not decode ({exc})") from exc
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono), int(rate)
