"""Audio rules: each drop with reason, value and threshold; the SNR estimate against signals of known SNR."""

import json

import numpy as np
import pytest
from media_fixtures import clipped_wav, noisy_wav, silence_wav, stereo_wav, telephone_wav, tone_wav

from fm_assets.transforms.audio.decode import decode_audio
from fm_assets.transforms.audio.rules import AudioRules, judge_audio, measure_audio


def judge(data: bytes, transcript: str = "Please enter your password.", **rules):
    samples, rate = decode_audio(data)
    return judge_audio(samples, rate, transcript, AudioRules(**rules))


@pytest.mark.parametrize(
    "data", [tone_wav(), stereo_wav(), telephone_wav()], ids=["16k", "44k1-stereo", "8k"]
)
def test_speech_like_audio_is_kept_with_measurements(data):
    verdict = judge(data)
    assert verdict.keep, verdict
    assert verdict.details["snr_db"] > 30 and verdict.details["clipping_fraction"] == 0
    assert 0.2 < verdict.details["silence_fraction"] < 0.6  # the pauses between bursts


def test_silence():
    verdict = judge(silence_wav())
    assert (verdict.reason, verdict.details["value"], verdict.details["threshold"]) == (
        "too_much_silence",
        1.0,
        0.8,
    )


def test_clipping():
    verdict = judge(clipped_wav())
    assert verdict.reason == "clipped_audio" and verdict.details["value"] > 0.05


def test_noisy_audio_has_a_low_snr():
    verdict = judge(noisy_wav())
    assert verdict.reason == "low_snr" and verdict.details["value"] < 10


def test_duration_and_sample_rate_bounds():
    assert judge(tone_wav(0.2)).reason == "audio_too_short"
    long = judge(tone_wav(3.0), max_duration_s=2.5)
    assert (long.reason, long.details["value"], long.details["threshold"]) == ("audio_too_long", 3.0, 2.5)
    low = judge(telephone_wav(), min_sample_rate=16000)
    assert (low.reason, low.details["value"]) == ("sample_rate_too_low", 8000)
    assert judge(tone_wav(), allowed_sample_rates=(8000,)).reason == "sample_rate_not_allowed"


def test_transcript_bounds():
    assert judge(tone_wav(), transcript="   ").reason == "transcript_too_short"
    assert judge(tone_wav(), transcript="word " * 10, transcript_max_chars=20).reason == "transcript_too_long"


def gated_sine(snr_db: float, seconds: float = 4.0, rate: int = 16000) -> np.ndarray:
    """A 440 Hz sine of amplitude 0.5 on for 200 ms, off for 200 ms, in white noise at ``snr_db``."""
    rng = np.random.default_rng(5)
    t = np.arange(int(seconds * rate)) / rate
    gate = (np.mod(t, 0.4) < 0.2).astype(np.float64)
    noise_power = (0.5**2 / 2) / 10 ** (snr_db / 10)
    return 0.5 * np.sin(2 * np.pi * 440 * t) * gate + rng.normal(0, np.sqrt(noise_power), t.shape)


@pytest.mark.parametrize("snr_db", [5.0, 15.0, 25.0, 35.0])
def test_snr_estimate_is_within_a_db_and_a_half_of_the_truth(snr_db):
    measured = measure_audio(gated_sine(snr_db)[:, None], 16000, AudioRules()).snr_db
    assert measured == pytest.approx(snr_db, abs=1.5)


def test_config_is_json_and_changes_with_a_threshold():
    config = AudioRules().config()
    assert json.loads(json.dumps(config)) == config
    assert AudioRules(min_snr_db=12).config() != config


def test_a_steady_noise_has_no_pauses_to_measure_noise_from():
    rng = np.random.default_rng(1)
    measured = measure_audio(rng.normal(0, 0.1, (32000, 1)), 16000, AudioRules())
    assert -100 <= measured.snr_db < 3 and measured.silence_fraction == 0
    assert measure_audio(np.zeros((16000, 1)), 16000, AudioRules()).snr_db == 0.0
