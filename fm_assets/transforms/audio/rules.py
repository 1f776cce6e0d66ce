"""Audio-text quality rules: duration, sample rate, silence, clipping, an SNR estimate, transcript length.

All measurements are on the mono mix (channel mean) in float64, cut into 20 ms frames:

- ``silence_fraction``: share of frames whose power (mean square, in dB relative to full scale)
  is below ``silence_threshold_db`` (-45 dB by default; a full-scale sine is -3 dB);
- ``clipping_fraction``: share of samples (all channels) with magnitude >= ``clip_level`` of full scale;
- ``snr_db``: a percentile estimate that needs no voice-activity model: noise power is the mean power
  of the quietest 10% of frames, signal power the mean power of the loudest 10% minus that noise;
  SNR = 10 log10(signal / noise), clamped to [-100, 100] dB (digital silence between words gives
  +100). It assumes speech with pauses: a clip with no pause at all (continuous music, a held tone,
  steady noise) reads as a low SNR.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fm_assets.engine.verdict import Verdict

FRAME_S = 0.02
SNR_CAP_DB = 100.0
_TINY = 1e-12


@dataclass(frozen=True)
class AudioRules:
    """Thresholds for ``judge_audio``; ``config()`` goes into the stage key."""

    version: str = "audio-rules-v1"
    min_duration_s: float = 0.3
    max_duration_s: float = 60.0
    min_sample_rate: int = 8000
    allowed_sample_rates: tuple[int, ...] = ()  # empty: any rate >= min_sample_rate
    max_silence_fraction: float = 0.8
    silence_threshold_db: float = -45.0
    max_clipping_fraction: float = 0.001
    clip_level: float = 0.99
    min_snr_db: float = 10.0
    transcript_min_chars: int = 1
    transcript_max_chars: int = 5000

    def config(self) -> dict[str, Any]:
        config = asdict(self)
        config["allowed_sample_rates"] = list(self.allowed_sample_rates)
        return config


@dataclass(frozen=True)
class AudioMeasurements:
    duration_s: float
    silence_fraction: float
    clipping_fraction: float
    snr_db: float


def mono(samples: np.ndarray) -> np.ndarray:
    """[frames] float64: the channel mean of [frames, channels] (or the input itself when 1-D)."""
    data = np.asarray(samples, dtype=np.float64)
    return data if data.ndim == 1 else data.mean(axis=1)


def frame_powers(signal: np.ndarray, sample_rate: int, frame_s: float = FRAME_S) -> np.ndarray:
    """Mean square per frame of ``frame_s`` seconds (a clip shorter than one frame is one frame)."""
    size = max(1, round(sample_rate * frame_s))
    count = max(1, len(signal) // size)
    usable = signal[: count * size] if len(signal) >= size else signal
    return (usable.reshape(count, -1) ** 2).mean(axis=1)


def _db(power: float) -> float:
    return 10.0 * math.log10(max(power, _TINY))


def measure_audio(samples: np.ndarray, sample_rate: int, rules: AudioRules) -> AudioMeasurements:
    """Duration, silence fraction, clipping fraction and SNR estimate (see the module docstring)."""
    signal = mono(samples)
    powers = frame_powers(signal, sample_rate)
    silent = float(np.mean(powers < 10.0 ** (rules.silence_threshold_db / 10.0)))
    clipped = float(np.mean(np.abs(np.asarray(samples, dtype=np.float64)) >= rules.clip_level))
    ordered = np.sort(powers)
    tail = max(1, len(ordered) // 10)
    noise = float(ordered[:tail].mean())
    loud = float(ordered[-tail:].mean())
    snr = max(-SNR_CAP_DB, min(SNR_CAP_DB, _db(max(loud - noise, 0.0)) - _db(noise)))
    return AudioMeasurements(round(len(signal) / sample_rate, 6), silent, clipped, snr)


def judge_audio(samples: np.ndarray, sample_rate: int, transcript: str, rules: AudioRules) -> Verdict:
    """Keep the pair, or the first failed rule with its measured value and threshold."""
    duration = len(samples) / sample_rate if sample_rate > 0 else 0.0
    if duration < rules.min_duration_s:
        return Verdict.over_limit("audio_too_short", round(duration, 4), rules.min_duration_s)
    if duration > rules.max_duration_s:
        return Verdict.over_limit("audio_too_long", round(duration, 4), rules.max_duration_s)
    if sample_rate < rules.min_sample_rate:
        return Verdict.over_limit("sample_rate_too_low", sample_rate, rules.min_sample_rate)
    if rules.allowed_sample_rates and sample_rate not in rules.allowed_sample_rates:
        return Verdict.over_limit("sample_rate_not_allowed", sample_rate, list(rules.allowed_sample_rates))
    m = measure_audio(samples, sample_rate, rules)
    if m.silence_fraction > rules.max_silence_fraction:
        return Verdict.over_limit(
            "too_much_silence", round(m.silence_fraction, 4), rules.max_silence_fraction
        )
    if m.clipping_fraction > rules.max_clipping_fraction:
        return Verdict.over_limit("clipped_audio", round(m.clipping_fraction, 6), rules.max_clipping_fraction)
    if m.snr_db < rules.min_snr_db:
        return Verdict.over_limit("low_snr", round(m.snr_db, 2), rules.min_snr_db)
    text = transcript.strip()
    if len(text) < rules.transcript_min_chars:
        return Verdict.over_limit("transcript_too_short", len(text), rules.transcript_min_chars)
    if len(text) > rules.transcript_max_chars:
        return Verdict.over_limit("transcript_too_long", len(text), rules.transcript_max_chars)
    return Verdict.kept(
        measurements={
            "duration_s": m.duration_s,
            "sample_rate": sample_rate,
            "silence_fraction": round(m.silence_fraction, 4),
            "clipping_fraction": round(m.clipping_fraction, 6),
            "snr_db": round(m.snr_db, 2),
            "transcript_chars": len(text),
        }
    )
