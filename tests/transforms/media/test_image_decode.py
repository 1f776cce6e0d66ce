"""Image probe/decode: real fixture files in, an RGB image or a MediaError with a reason code out."""

import io
import pickle
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from media_fixtures import (
    blank_png,
    bomb_png,
    exif_jpeg,
    image_set,
    jpeg_image,
    not_an_image,
    png_image,
    rgba_png,
    truncated_jpeg,
)
from PIL import Image

from fm_assets.transforms.image.decode import decode_image, probe_image
from fm_assets.transforms.media_errors import MediaError, error_text

SIZES = {
    "landscape_jpeg": ("jpeg", 640, 480),
    "portrait_jpeg": ("jpeg", 300, 600),
    "square_png": ("png", 256, 256),
    "wide_png": ("png", 900, 300),
    "large_jpeg": ("jpeg", 1600, 1200),
    "small_png": ("png", 96, 80),
}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_probe_and_decode_report_the_real_size(name):
    data = image_set()[name]
    info = probe_image(data)
    assert (info.format, info.width, info.height) == SIZES[name]
    image = decode_image(data)
    assert image.mode == "RGB" and image.size == SIZES[name][1:]


def reason_of(data: bytes, **kwargs) -> MediaError:
    with pytest.raises(MediaError) as caught:
        decode_image(data, **kwargs)
    return caught.value


def test_truncated_jpeg_fails_instead_of_being_padded():
    whole = jpeg_image(400, 300, seed=7)
    assert probe_image(truncated_jpeg()).width == 400  # the header is intact
    assert reason_of(truncated_jpeg()).reason == "truncated_image"
    assert decode_image(whole).size == (400, 300)


def test_not_an_image_and_empty_bytes():
    assert reason_of(not_an_image()).reason == "not_an_image"
    assert reason_of(b"").reason == "not_an_image"


def test_decompression_bomb_is_refused_from_the_header():
    bomb = bomb_png()
    assert len(bomb) < 200
    for call in (probe_image, decode_image):
        with pytest.raises(MediaError) as caught:
            call(bomb)
        assert caught.value.reason == "decompression_bomb"


def test_max_pixels_is_the_callers_limit():
    data = jpeg_image(640, 480)
    error = reason_of(data, max_pixels=640 * 480 - 1)
    assert error.reason == "decompression_bomb"
    assert error.details == {"width": 640, "height": 480, "pixels": 307200, "max_pixels": 307199}
    assert decode_image(data, max_pixels=640 * 480).size == (640, 480)


def test_an_image_format_we_do_not_take_is_unsupported():
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(buffer, "ICO")
    error = reason_of(buffer.getvalue())
    assert error.reason == "unsupported_format" and error.details["format"] == "ico"


def test_corrupt_png_data_is_a_media_error():
    data = bytearray(png_image(64, 64))
    idat = data.index(b"IDAT")
    data[idat + 8 : idat + 40] = b"\xff" * 32  # garbage inside the zlib stream
    assert reason_of(bytes(data)).reason in ("corrupt_image", "truncated_image")


def test_transparency_is_composited_on_white():
    image = decode_image(rgba_png(200, 150))
    pixels = np.asarray(image)
    assert (pixels[:, :100] == 255).all()  # the transparent half
    assert pixels[:, 100:].std() > 10


def test_sixteen_bit_grey_is_scaled_not_clipped():
    ramp = (np.arange(256, dtype=np.uint32) * 257).astype(np.uint16).reshape(16, 16)
    buffer = io.BytesIO()
    Image.fromarray(ramp).save(buffer, "PNG")
    pixels = np.asarray(decode_image(buffer.getvalue()))[..., 0]
    assert np.array_equal(pixels.reshape(-1), np.arange(256))


def test_exif_orientation_is_applied():
    data = exif_jpeg(80, 40, orientation=6)
    assert probe_image(data).width == 80
    assert decode_image(data).size == (40, 80)


def test_blank_image_decodes_fine():
    assert decode_image(blank_png()).getextrema() == ((250, 250), (250, 250), (250, 250))


def test_media_error_is_readable_picklable_and_free_of_addresses():
    error = MediaError("truncated_image", {"format": "jpeg", "bytes": 12})
    assert str(error) == 'truncated_image: {"bytes": 12, "format": "jpeg"}'
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.reason, copy.details) == (error.reason, error.details)
    text = error_text(OSError("cannot read <_io.BytesIO object at 0x7f00deadbeef>"))
    assert "0x" not in text and text == "cannot read <data>"


def _png_with_chunk(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = (
        struct.pack(">I", len(header)) + b"IHDR" + header + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    )
    return b"\x89PNG\r\n\x1a\n" + chunk


def test_zero_sized_png_header_is_refused():
    with pytest.raises(MediaError):
        decode_image(_png_with_chunk(0, 10))


SEEDS = {"png": png_image(64, 48, seed=3), "jpeg": jpeg_image(64, 48, seed=1), "exif_jpeg": exif_jpeg()}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(SEEDS)),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=6),
)
def test_damaged_images_only_ever_raise_media_error(name, cut, flips):
    data = bytearray(SEEDS[name][: max(1, int(len(SEEDS[name]) * cut))])
    for where, value in flips:
        data[min(len(data) - 1, int(where * len(data)))] = value
    try:
        image = decode_image(bytes(data))
    except MediaError as error:
        assert error.reason in {"not_an_image", "truncated_image", "corrupt_image", "invalid_dimensions",
                                "decompression_bomb", "unsupported_format"}  # fmt: skip
    else:
        assert image.mode == "RGB"
