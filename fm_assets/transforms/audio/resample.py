"""The versioned audio normalization policy: mono, resampled to 16 kHz, encoded as 16-bit FLAC.

Resampler: ``scipy.signal.resample_poly`` (polyphase FIR, the filter designed by ``firwin`` with a
Kaiser window, beta 5.0, scipy's default), run in float64 on the mono mix. Quantisation to 16 bits is
done here (round half to even, clipped to the int16 range), not by libsndfile, so the PCM is a pure
function of the input samples; libFLAC then encodes it losslessly at a fixed compression level, and
``config()`` records the scipy and libsndfile versions so a library upgrade changes the stage key.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from math import gcd
from typing import Any

import numpy as np
import scipy
import soundfile as sf

from fm_assets.transforms.audio.decode import decode_audio
from fm_assets.transforms.media_errors import ENCODE_FAILED, MediaError, error_text

_RESAMPLERS = ("scipy.signal.resample_poly",)
_CODECS = ("flac", "wav")
_KAISER_BETA = 5.0


@dataclass(frozen=True)
class AudioNormalizePolicy:
    version: str = "audio-normalize-v1"
    sample_rate: int = 16000
    mono: bool = True
    codec: str = "flac"  # or "wav" (16-bit PCM)
    resampler: str = "scipy.signal.resample_poly"

    def __post_init__(self) -> None:
        if self.codec not in _CODECS:
            raise ValueError(f"codec must be one of {_CODECS}, got {self.codec!r}")
        if self.resampler not in _RESAMPLERS:
            raise ValueError(f"resampler must be one of {_RESAMPLERS}, got {self.resampler!r}")
        if self.sample_rate <= 0:
            raise ValueError("sample_rate must be positive")

    def config(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "window": ["kaiser", _KAISER_BETA],
            "subtype": "PCM_16",
            "scipy": scipy.__version__,
            "soundfile": sf.__version__,
            "libsndfile": sf.__libsndfile_version__,
        }


@dataclass(frozen=True)
class NormalizedAudio:
    data: bytes
    sample_rate: int
    frames: int
    duration_s: float
    channels: int = 1


def resample(samples: np.ndarray, source_rate: int, target_rate: int) -> np.ndarray:
    """[frames, channels] float64 at ``target_rate`` (polyphase, Kaiser window); unchanged when rates match."""
    from scipy.signal import resample_poly  # seconds to import: only where audio is resampled

    data = np.asarray(samples, dtype=np.float64)
    if source_rate == target_rate:
        return data
    divisor = gcd(source_rate, target_rate)
    return resample_poly(
        data, target_rate // divisor, source_rate // divisor, axis=0, window=("kaiser", _KAISER_BETA)
    )


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """float in [-1, 1] -> int16 with x * 32768 rounded half to even and clipped (exact, machine-independent)."""
    return np.clip(np.rint(samples * 32768.0), -32768, 32767).astype(np.int16)


def encode_audio(pcm: np.ndarray, sample_rate: int, codec: str) -> bytes:
    buffer = io.BytesIO()
    try:
        if codec == "flac":
            sf.write(buffer, pcm, sample_rate, format="FLAC", subtype="PCM_16", compression_level=0.5)
        else:
            sf.write(buffer, pcm, sample_rate, format="WAV", subtype="PCM_16")
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise MediaError(ENCODE_FAILED, {"codec": codec, "error": error_text(exc)}) from None
    return buffer.getvalue()


def normalize_audio(data: bytes, policy: AudioNormalizePolicy) -> NormalizedAudio:
    """Decode, mix to mono (if the policy says so), resample and encode; ``MediaError`` when undecodable."""
    samples, rate = decode_audio(data)
    mixed = samples.astype(np.float64).mean(axis=1, keepdims=True) if policy.mono else samples
    pcm = to_pcm16(resample(mixed, rate, policy.sample_rate))
    encoded = encode_audio(pcm, policy.sample_rate, policy.codec)
    frames = int(pcm.shape[0])
    return NormalizedAudio(
        encoded, policy.sample_rate, frames, round(frames / policy.sample_rate, 6), int(pcm.shape[1])
    )
