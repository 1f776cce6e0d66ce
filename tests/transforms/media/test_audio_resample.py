"""Audio normalization: 16 kHz mono FLAC, lossless round trip, anti-aliasing, byte-identical reruns."""

import io
import json

import numpy as np
import pytest
import soundfile as sf
from media_fixtures import stereo_wav, telephone_wav, tone_wav, wav_bytes, zero_length_wav

from fm_assets.transforms.audio.decode import decode_audio
from fm_assets.transforms.audio.resample import AudioNormalizePolicy, normalize_audio, resample, to_pcm16
from fm_assets.transforms.media_errors import MediaError

POLICY = AudioNormalizePolicy()


@pytest.mark.parametrize(
    ("data", "frames"),
    [(telephone_wav(1.2), 19200), (stereo_wav(1.5, 44100), 24000), (tone_wav(2.0, 16000), 32000)],
    ids=["8k", "44k1-stereo", "16k"],
)
def test_output_is_16k_mono_flac_of_the_same_duration(data, frames):
    result = normalize_audio(data, POLICY)
    info = sf.info(io.BytesIO(result.data))
    assert (info.format, info.subtype, info.samplerate, info.channels) == ("FLAC", "PCM_16", 16000, 1)
    assert info.frames == result.frames == frames
    assert result.duration_s == pytest.approx(frames / 16000)


def test_flac_is_lossless_and_bytes_are_reproducible():
    data = stereo_wav()
    result = normalize_audio(data, POLICY)
    assert normalize_audio(data, POLICY).data == result.data
    samples, rate = decode_audio(data)
    expected = to_pcm16(resample(samples.astype(np.float64).mean(axis=1, keepdims=True), rate, 16000))
    decoded, _ = sf.read(io.BytesIO(result.data), dtype="int16", always_2d=True)
    assert np.array_equal(decoded, expected)


def sine(freq: float, rate: int, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return 0.5 * np.sin(2 * np.pi * freq * t)


def level_db(data: bytes) -> float:
    samples, _ = sf.read(io.BytesIO(data), dtype="float64")
    return 10 * np.log10(np.mean(samples[2000:-2000] ** 2) + 1e-20)


def test_pitch_is_kept_and_frequencies_above_8k_are_filtered():
    in_band = normalize_audio(wav_bytes(sine(1000, 44100), 44100), POLICY)
    samples, _ = sf.read(io.BytesIO(in_band.data), dtype="float64")
    spectrum = np.abs(np.fft.rfft(samples))
    assert np.argmax(spectrum) * 16000 / len(samples) == pytest.approx(1000, abs=2)
    assert level_db(in_band.data) == pytest.approx(10 * np.log10(0.125), abs=0.2)
    # A 12 kHz tone would alias to 4 kHz without the low-pass; the polyphase filter removes it.
    aliased = normalize_audio(wav_bytes(sine(12000, 44100), 44100), POLICY)
    assert level_db(aliased.data) < level_db(in_band.data) - 50


def test_stereo_kept_when_the_policy_says_so_and_wav_output():
    result = normalize_audio(stereo_wav(), AudioNormalizePolicy(mono=False, codec="wav"))
    info = sf.info(io.BytesIO(result.data))
    assert (info.format, info.channels, result.channels) == ("WAV", 2, 2)


def test_pcm16_quantisation_rounds_and_clips():
    values = np.array([-1.5, -1.0, -0.5 / 32768, 0.4 / 32768, 1.5 / 32768, 1.0, 2.0])
    assert to_pcm16(values).tolist() == [-32768, -32768, 0, 0, 2, 32767, 32767]


def test_bad_input_and_config():
    with pytest.raises(MediaError) as caught:
        normalize_audio(zero_length_wav(), POLICY)
    assert caught.value.reason == "zero_length_audio"
    config = POLICY.config()
    assert json.loads(json.dumps(config)) == config
    assert config["resampler"] == "scipy.signal.resample_poly" and config["sample_rate"] == 16000
    assert {"scipy", "libsndfile", "window"} <= set(config)
    assert AudioNormalizePolicy(sample_rate=22050).config() != config
    with pytest.raises(ValueError):
        AudioNormalizePolicy(codec="mp3")
