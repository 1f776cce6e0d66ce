"""Audio probe/decode with soundfile: exact PCM, and a MediaError with a reason for every bad input."""

import io
import wave

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from media_fixtures import (
    stereo_wav,
    telephone_wav,
    tone_wav,
    unsupported_codec_wav,
    zero_length_wav,
)

from fm_assets.transforms.audio.decode import decode_audio, probe_audio, wave_format_tag
from fm_assets.transforms.media_errors import MediaError


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (tone_wav(2.0, 16000), (16000, 1, 32000)),
        (stereo_wav(1.5, 44100), (44100, 2, 66150)),
        (telephone_wav(1.2), (8000, 1, 9600)),
    ],
)
def test_probe_reads_the_header(data, expected):
    info = probe_audio(data)
    assert (info.sample_rate, info.channels, info.frames) == expected
    assert info.format == "wav" and info.subtype == "pcm_16"
    assert info.duration_s == pytest.approx(expected[2] / expected[0])


def test_decode_is_exact_pcm():
    data = stereo_wav()
    with wave.open(io.BytesIO(data)) as reader:
        pcm = np.frombuffer(reader.readframes(reader.getnframes()), "<i2").reshape(-1, 2)
    samples, rate = decode_audio(data)
    assert rate == 44100 and samples.dtype == np.float32 and samples.shape == pcm.shape
    assert np.array_equal(samples * 32768, pcm.astype(np.float32))


def reason(data: bytes) -> MediaError:
    with pytest.raises(MediaError) as caught:
        decode_audio(data)
    with pytest.raises(MediaError) as probed:
        probe_audio(data)
    assert probed.value.reason == caught.value.reason
    return caught.value


def test_zero_length_audio():
    assert reason(zero_length_wav()).reason == "zero_length_audio"
    assert reason(b"").reason == "zero_length_audio"


def test_unknown_wave_format_tag_is_an_unsupported_codec():
    error = reason(unsupported_codec_wav(0x1234))
    assert error.reason == "unsupported_codec" and error.details["format_tag"] == "0x1234"
    assert "0x7f" not in str(error)  # no object addresses in details
    assert wave_format_tag(unsupported_codec_wav(0x5678)) == 0x5678
    assert wave_format_tag(tone_wav()) == 1


def test_not_audio_and_broken_header():
    assert reason(b"this is a text file, not a sound\n" * 4).reason == "not_audio"
    assert reason(tone_wav()[:30]).reason == "corrupt_audio"  # RIFF header cut inside the fmt chunk


def test_truncated_data_chunk_decodes_what_is_there():
    data = tone_wav(2.0, 16000)
    samples, _ = decode_audio(data[: 44 + 2 * 1000])
    assert samples.shape == (1000, 1)
    assert np.array_equal(samples, decode_audio(data)[0][:1000])


SEED = tone_wav(0.5, 8000)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), max_size=6),
)
def test_damaged_wavs_only_ever_raise_media_error(cut, flips):
    data = bytearray(SEED[: int(len(SEED) * cut)])
    for where, value in flips:  # damage the header, where parsers break
        if where < len(data):
            data[where] = value
    try:
        samples, rate = decode_audio(bytes(data))
    except MediaError as error:
        assert error.reason in {"zero_length_audio", "unsupported_codec", "corrupt_audio", "not_audio"}
    else:
        assert samples.ndim == 2 and samples.shape[0] > 0 and rate > 0


def test_audio_announcing_too_many_samples_is_refused_before_decoding():
    data = stereo_wav(1.5, 44100)
    error = reason_for_decode(data, max_samples=66150 * 2 - 1)
    assert error.reason == "audio_too_large"
    assert error.details == {"frames": 66150, "channels": 2, "max_samples": 132299}
    assert decode_audio(data, max_samples=66150 * 2)[0].shape == (66150, 2)


def reason_for_decode(data: bytes, **kwargs) -> MediaError:
    with pytest.raises(MediaError) as caught:
        decode_audio(data, **kwargs)
    return caught.value
