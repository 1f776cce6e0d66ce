"""The image resize policy: target sizes, deterministic re-encoding, the policy in the stage config."""

import io
import json

import numpy as np
import pytest
from media_fixtures import exif_jpeg, image_set, jpeg_image, not_an_image, rgba_png, truncated_jpeg
from PIL import Image

from fm_assets.transforms.image.decode import decode_image
from fm_assets.transforms.image.phash import hamming, phash64
from fm_assets.transforms.image.resize import (
    ImageResizePolicy,
    encode_image,
    normalize_image,
    resize_image,
    thumbnail,
)
from fm_assets.transforms.media_errors import MediaError


@pytest.mark.parametrize(
    ("size", "policy", "expected"),
    [
        ((640, 480), ImageResizePolicy(shorter_side=384), (512, 384)),
        ((1600, 1200), ImageResizePolicy(shorter_side=384), (512, 384)),
        ((300, 600), ImageResizePolicy(shorter_side=256), (256, 512)),
        ((900, 300), ImageResizePolicy(shorter_side=384), (900, 300)),  # never upscaled by default
        ((900, 300), ImageResizePolicy(shorter_side=384, upscale=True), (1024, 341)),  # long side capped
        ((3000, 500), ImageResizePolicy(shorter_side=384, max_long_side=1024), (1024, 171)),
        ((96, 80), ImageResizePolicy(shorter_side=384), (96, 80)),
    ],
)
def test_target_size(size, policy, expected):
    assert policy.target_size(*size) == expected


def test_normalized_images_decode_to_the_target_size_as_jpeg():
    policy = ImageResizePolicy(shorter_side=256, max_long_side=512, quality=85)
    for data in image_set().values():
        original = decode_image(data)
        result = normalize_image(data, policy)
        decoded = Image.open(io.BytesIO(result.data))
        assert decoded.format == "JPEG" and result.format == "jpeg"
        assert decoded.size == (result.width, result.height) == policy.target_size(*original.size)
        assert not decoded.info.get("exif") and not decoded.info.get("icc_profile")
        assert hamming(phash64(decoded.convert("RGB")), phash64(original)) <= 8  # still the same picture


def test_same_bytes_and_policy_give_the_same_bytes():
    data = jpeg_image(800, 600, seed=11)
    policy = ImageResizePolicy()
    assert normalize_image(data, policy).data == normalize_image(data, policy).data
    assert normalize_image(data, ImageResizePolicy(quality=60)).data != normalize_image(data, policy).data


def test_png_output_and_alpha():
    result = normalize_image(rgba_png(300, 200), ImageResizePolicy(format="png", shorter_side=100))
    decoded = Image.open(io.BytesIO(result.data))
    assert decoded.format == "PNG" and decoded.mode == "RGB" and decoded.size == (150, 100)
    assert decoded.getpixel((5, 50)) == (255, 255, 255)


def test_bad_input_raises_media_error():
    for data, reason in ((truncated_jpeg(), "truncated_image"), (not_an_image(), "not_an_image")):
        with pytest.raises(MediaError) as caught:
            normalize_image(data, ImageResizePolicy())
        assert caught.value.reason == reason


def test_policy_config_names_every_parameter_and_the_encoder():
    config = ImageResizePolicy().config()
    assert json.loads(json.dumps(config)) == config
    assert {"version", "shorter_side", "max_long_side", "format", "quality", "resample", "pillow"} <= set(
        config
    )
    assert ImageResizePolicy(shorter_side=448).config() != config
    with pytest.raises(ValueError):
        ImageResizePolicy(format="gif")
    with pytest.raises(ValueError):
        ImageResizePolicy(shorter_side=2048, max_long_side=1024)


def test_thumbnail_fits_the_box():
    thumb = Image.open(io.BytesIO(thumbnail(decode_image(jpeg_image(640, 320)), size=128)))
    assert thumb.format == "JPEG" and thumb.size == (128, 64)


def test_large_jpeg_is_decoded_at_reduced_scale_with_the_same_result_size():
    data = jpeg_image(2400, 1800, seed=12)
    policy = ImageResizePolicy(shorter_side=300)
    fast = normalize_image(data, policy)
    full = encode_image(resize_image(decode_image(data), policy), "jpeg", policy.quality)
    a = np.asarray(Image.open(io.BytesIO(fast.data)).convert("L"), dtype=np.float64)
    b = np.asarray(Image.open(io.BytesIO(full)).convert("L"), dtype=np.float64)
    assert (fast.width, fast.height) == (400, 300) and a.shape == b.shape
    assert np.abs(a - b).mean() < 2.0  # the same picture, within JPEG noise
    assert fast.data != full  # and really a different (reduced-scale) decode


def test_draft_decoding_respects_exif_rotation():
    data = exif_jpeg(1600, 800, orientation=6)  # stored landscape, displayed portrait
    result = normalize_image(data, ImageResizePolicy(shorter_side=200))
    assert (result.width, result.height) == (200, 400)
