"""Small media inputs for tests, generated deterministically (seeded numpy, stdlib ``wave``, Pillow).

Plain functions returning bytes, importable by any test: good images with real structure (gradients,
shapes, texture) in several sizes and aspect ratios, a near duplicate, a blank image, broken images,
and WAVs: speech-like bursts with a little noise, silence, clipped, noisy, empty, an unknown codec.
"""

from __future__ import annotations

import functools
import io
import struct
import tarfile
import wave
import zlib

import numpy as np
from PIL import Image

# --------------------------------------------------------------------------------------------
# Images


def structured_pixels(width: int, height: int, seed: int = 0) -> np.ndarray:
    """uint8 [height, width, 3]: two gradients, a seeded texture and a few filled rectangles and discs."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    fx, fy = rng.uniform(2, 9, size=2)
    texture = 40 * np.sin(2 * np.pi * fx * x / width) * np.cos(2 * np.pi * fy * y / height)
    pixels = np.stack(
        [80 + 120 * x / max(1, width - 1), 60 + 140 * y / max(1, height - 1), 128 + 0 * x], axis=-1
    )
    pixels += texture[..., None]
    for _ in range(6):
        x0, x1 = sorted(rng.integers(0, width, size=2))
        y0, y1 = sorted(rng.integers(0, height, size=2))
        pixels[y0 : y1 + 1, x0 : x1 + 1] = rng.integers(0, 256, size=3)
    for _ in range(4):
        cx, cy = rng.integers(0, width), rng.integers(0, height)
        radius = rng.integers(max(2, min(width, height) // 12), max(3, min(width, height) // 4))
        pixels[(x - cx) ** 2 + (y - cy) ** 2 < radius**2] = rng.integers(0, 256, size=3)
    pixels += rng.normal(0, 6, size=pixels.shape)
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def _encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


@functools.cache  # bytes are immutable; generating the pixels is the slow part
def png_image(width: int = 320, height: int = 240, seed: int = 0) -> bytes:
    return _encode(Image.fromarray(structured_pixels(width, height, seed)), "PNG")


@functools.cache  # bytes are immutable; generating the pixels is the slow part
def jpeg_image(width: int = 640, height: int = 480, seed: int = 0, quality: int = 90) -> bytes:
    return _encode(Image.fromarray(structured_pixels(width, height, seed)), "JPEG", quality=quality)


def exif_jpeg(width: int = 80, height: int = 40, orientation: int = 6, seed: int = 0) -> bytes:
    """A JPEG whose EXIF says to rotate it (6: 90 degrees clockwise) before display."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "fm test camera"
    return _encode(Image.fromarray(structured_pixels(width, height, seed)), "JPEG", exif=exif)


def rgba_png(width: int = 200, height: int = 150, seed: int = 0) -> bytes:
    """A PNG with an alpha channel (left half transparent)."""
    rgb = structured_pixels(width, height, seed)
    alpha = np.full((height, width, 1), 255, dtype=np.uint8)
    alpha[:, : width // 2] = 0
    return _encode(Image.fromarray(np.concatenate([rgb, alpha], axis=-1), "RGBA"), "PNG")


def image_set() -> dict[str, bytes]:
    """Good images of several sizes and aspect ratios: name -> bytes."""
    return {
        "landscape_jpeg": jpeg_image(640, 480, seed=1),
        "portrait_jpeg": jpeg_image(300, 600, seed=2),
        "square_png": png_image(256, 256, seed=3),
        "wide_png": png_image(900, 300, seed=4),
        "large_jpeg": jpeg_image(1600, 1200, seed=5),
        "small_png": png_image(96, 80, seed=6),
    }


def near_duplicate(data: bytes, scale: float = 0.8, quality: int = 70) -> bytes:
    """The same picture resized by ``scale`` and recompressed as JPEG at ``quality``."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return _encode(image.resize(size, Image.Resampling.BICUBIC), "JPEG", quality=quality)


def blank_png(width: int = 256, height: int = 256, value: int = 250) -> bytes:
    return _encode(Image.new("RGB", (width, height), (value, value, value)), "PNG")


def truncated_jpeg(keep: float = 0.6) -> bytes:
    """A real JPEG cut after ``keep`` of its bytes (header intact, scan data missing)."""
    data = jpeg_image(400, 300, seed=7)
    return data[: int(len(data) * keep)]


def not_an_image() -> bytes:
    return b"<html><body>This is a web page, not a picture.</body></html>\n"


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny, well-formed PNG header claiming ``width`` x ``height`` 8-bit grey pixels (1e10 by default)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * 1024, 9)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", rows)
        + _png_chunk(b"IEND", b"")
    )


# --------------------------------------------------------------------------------------------
# Audio (16-bit PCM WAV through the stdlib, so fixtures need no audio library)


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """float samples in [-1, 1] shaped [frames] or [frames, channels] -> 16-bit PCM WAV."""
    data = samples if samples.ndim == 2 else samples[:, None]
    pcm = np.clip(np.rint(data * 32767), -32768, 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(data.shape[1])
        out.setsampwidth(2)
        out.setframerate(sample_rate)
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


def speech_like(
    duration_s: float = 2.0, sample_rate: int = 16000, seed: int = 0, noise: float = 0.002
) -> np.ndarray:
    """Syllable-like harmonic bursts (180 ms on, 120 ms off, ~0.4 peak) over faint white noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(duration_s * sample_rate)) / sample_rate
    pitch = 140 + 60 * rng.random()
    voice = sum(np.sin(2 * np.pi * pitch * k * t + rng.uniform(0, 6.28)) / k for k in range(1, 6))
    phase = np.mod(t, 0.3)
    envelope = np.where(phase < 0.18, np.sin(np.pi * phase / 0.18), 0.0)
    return 0.25 * voice * envelope + rng.normal(0, noise, size=t.shape)


def tone_wav(duration_s: float = 2.0, sample_rate: int = 16000, seed: int = 0) -> bytes:
    """Speech-like bursts with a little noise: passes the default audio rules."""
    return wav_bytes(speech_like(duration_s, sample_rate, seed), sample_rate)


def stereo_wav(duration_s: float = 1.5, sample_rate: int = 44100, seed: int = 1) -> bytes:
    left = speech_like(duration_s, sample_rate, seed)
    return wav_bytes(np.stack([left, 0.5 * left], axis=1), sample_rate)


def telephone_wav(duration_s: float = 1.2, seed: int = 2) -> bytes:
    """8 kHz mono, like the Asterisk prompts."""
    return tone_wav(duration_s, 8000, seed)


def silence_wav(duration_s: float = 2.0, sample_rate: int = 16000) -> bytes:
    return wav_bytes(np.zeros(int(duration_s * sample_rate)), sample_rate)


def clipped_wav(duration_s: float = 2.0, sample_rate: int = 16000, seed: int = 3) -> bytes:
    """Speech-like bursts amplified 5x and hard-clipped at full scale."""
    return wav_bytes(np.clip(5 * speech_like(duration_s, sample_rate, seed), -1, 1), sample_rate)


def noisy_wav(duration_s: float = 2.0, sample_rate: int = 16000, seed: int = 4) -> bytes:
    """Speech-like bursts buried in white noise about as loud as the speech."""
    return wav_bytes(speech_like(duration_s, sample_rate, seed, noise=0.15), sample_rate)


def zero_length_wav(sample_rate: int = 16000) -> bytes:
    """A valid WAV header with no frames."""
    return wav_bytes(np.zeros(0), sample_rate)


def unsupported_codec_wav(format_tag: int = 0x1234) -> bytes:
    """A RIFF/WAVE file whose ``fmt `` chunk names an encoding nobody implements."""
    fmt = struct.pack("<HHIIHH", format_tag, 1, 16000, 32000, 2, 16)
    payload = bytes(range(256)) * 16
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(payload))
        + payload
    )
    return b"RIFF" + struct.pack("<I", len(body)) + body


# --------------------------------------------------------------------------------------------
# Debian packages (for the sample-data readers)


def deb_package(files: dict[str, bytes], hard_links: dict[str, str] | None = None) -> bytes:
    """A minimal .deb (ar: debian-binary, control.tar.gz, data.tar.gz) holding ``files`` and hard links
    ``{link path: target path}`` stored as tar LNKTYPE members after their targets, as dpkg-deb does."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo("./" + name.lstrip("/"))
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for link, target in (hard_links or {}).items():
            info = tarfile.TarInfo("./" + link.lstrip("/"))
            info.type = tarfile.LNKTYPE
            info.linkname = "./" + target.lstrip("/")
            tar.addfile(info)
    control = io.BytesIO()
    with tarfile.open(fileobj=control, mode="w:gz") as tar:
        body = b"Package: fm-test\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t.org>\nDescription: t\n"
        info = tarfile.TarInfo("./control")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    out = io.BytesIO()
    out.write(b"!<arch>\n")
    for name, payload in (
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", control.getvalue()),
        ("data.tar.gz", data.getvalue()),
    ):
        out.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(payload):<10}`\n".encode())
        out.write(payload + (b"\n" if len(payload) % 2 else b""))
    return out.getvalue()
