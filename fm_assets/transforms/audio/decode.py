"""Audio probing and decoding with soundfile (libsndfile), refusing bad input with a ``MediaError`` reason code.

Decoder: soundfile, whose wheels bundle libsndfile (no system library, no ffmpeg). It reads WAV in
every common encoding (PCM 8-32 bit, float, A-law/u-law, ADPCM, GSM), FLAC, Ogg Vorbis/Opus, AIFF and
MP3, and it is also the only small dependency that *writes* FLAC, which the normalize policy needs.
The stdlib ``wave`` module reads integer PCM WAV only; torchaudio would pull a torch build and an
ffmpeg into the pipeline for formats we do not receive. Integer PCM decodes exactly (sample / 2^15
for 16-bit), so decoded samples are identical on every machine.

libsndfile cannot say *why* it refuses a file, so a refused RIFF/WAVE file is looked at here: a
``fmt `` chunk with an encoding tag libsndfile does not handle is ``unsupported_codec``.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

import numpy as np
import soundfile as sf

from fm_assets.transforms.media_errors import (
    AUDIO_TOO_LARGE,
    CORRUPT_AUDIO,
    NOT_AUDIO,
    UNSUPPORTED_CODEC,
    ZERO_LENGTH_AUDIO,
    MediaError,
    error_text,
)

# WAVE format tags libsndfile decodes (PCM, MS ADPCM, IEEE float, A-law, u-law, IMA ADPCM, GSM 6.10,
# G.721, extensible); anything else in a "fmt " chunk is an unsupported codec.
_WAVE_TAGS_DECODED = frozenset({0x0001, 0x0002, 0x0003, 0x0006, 0x0007, 0x0011, 0x0031, 0x0040, 0xFFFE})
DEFAULT_MAX_SAMPLES = 48_000 * 2 * 15 * 60  # 15 minutes of 48 kHz stereo: 345 MB as float32
_AUDIO_MAGIC = (b"RIFF", b"RIFX", b"RF64", b"fLaC", b"OggS", b"FORM", b"ID3", b"\xff\xfb", b"\xff\xf3")


@dataclass(frozen=True)
class AudioInfo:
    """What the container says: ``format`` ("wav", "flac", ...), ``subtype`` ("pcm_16", ...), shape, duration."""

    format: str
    sample_rate: int
    channels: int
    frames: int
    duration_s: float
    subtype: str


def wave_format_tag(data: bytes) -> int | None:
    """The encoding tag in a RIFF/WAVE file's ``fmt `` chunk, or None when there is none to read."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    offset = 12
    while offset + 8 <= len(data):
        chunk_id = data[offset : offset + 4]
        (size,) = struct.unpack_from("<I", data, offset + 4)
        if chunk_id == b"fmt " and offset + 10 <= len(data):
            return struct.unpack_from("<H", data, offset + 8)[0]
        offset += 8 + size + (size & 1)
    return None


def _refused(data: bytes, error: Exception) -> MediaError:
    message = error_text(error)
    tag = wave_format_tag(data)
    if tag is not None and tag not in _WAVE_TAGS_DECODED:
        return MediaError(
            UNSUPPORTED_CODEC, {"container": "wav", "format_tag": f"0x{tag:04x}", "error": message}
        )
    if data.startswith(_AUDIO_MAGIC):
        return MediaError(CORRUPT_AUDIO, {"bytes": len(data), "error": message})
    return MediaError(NOT_AUDIO, {"bytes": len(data), "head": data[:8].hex()})


def _check_not_empty(data: bytes) -> None:
    if not data:
        raise MediaError(ZERO_LENGTH_AUDIO, {"bytes": 0})


def probe_audio(data: bytes) -> AudioInfo:
    """Container, encoding, sample rate, channels and length from the header; ``MediaError`` when unusable."""
    _check_not_empty(data)
    try:
        info = sf.info(io.BytesIO(data))
    except Exception as exc:  # libsndfile and soundfile's wrappers raise several types on bad bytes
        raise _refused(data, exc) from None
    if info.frames <= 0 or info.samplerate <= 0 or info.channels <= 0:
        raise MediaError(
            ZERO_LENGTH_AUDIO,
            {"frames": int(info.frames), "sample_rate": int(info.samplerate), "channels": int(info.channels)},
        )
    return AudioInfo(
        format=str(info.format).lower(),
        sample_rate=int(info.samplerate),
        channels=int(info.channels),
        frames=int(info.frames),
        duration_s=round(info.frames / info.samplerate, 6),
        subtype=str(info.subtype).lower(),
    )


def decode_audio(data: bytes, max_samples: int = DEFAULT_MAX_SAMPLES) -> tuple[np.ndarray, int]:
    """(float32 samples shaped [frames, channels] in [-1, 1], sample rate); ``MediaError`` when unusable.

    A file whose header announces more than ``max_samples`` samples (frames x channels) is refused as
    ``audio_too_large`` before decoding: an hour of FLAC silence is a few kilobytes and 700 MB of float32.
    """
    _check_not_empty(data)
    try:
        with sf.SoundFile(io.BytesIO(data)) as reader:
            if reader.frames * reader.channels > max_samples:
                raise MediaError(
                    AUDIO_TOO_LARGE,
                    {
                        "frames": int(reader.frames),
                        "channels": int(reader.channels),
                        "max_samples": max_samples,
                    },
                )
            samples = reader.read(dtype="float32", always_2d=True)
            sample_rate = reader.samplerate
    except MediaError:
        raise
    except Exception as exc:  # libsndfile and soundfile's wrappers raise several types on bad bytes
        raise _refused(data, exc) from None
    if samples.shape[0] == 0:
        raise MediaError(ZERO_LENGTH_AUDIO, {"frames": 0, "sample_rate": int(sample_rate)})
    if not np.isfinite(samples).all():
        raise MediaError(CORRUPT_AUDIO, {"error": "non-finite samples"})
    return samples, int(sample_rate)
