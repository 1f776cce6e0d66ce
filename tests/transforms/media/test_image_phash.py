"""Perceptual hashes: agree with the imagehash reference, near duplicates stay close, banding never misses."""

import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from media_fixtures import image_set, jpeg_image, near_duplicate, png_image

from fm_assets.transforms.image.decode import decode_image
from fm_assets.transforms.image.phash import (
    as_int64,
    as_uint64,
    band_keys,
    band_widths,
    bands_for_distance,
    dhash64,
    hamming,
    phash64,
    phash_bytes,
    phash_many,
)

SMALL = [png_image(w, h, seed=s) for s, (w, h) in enumerate([(96, 80), (150, 120), (64, 180), (191, 100)])]


def test_phash_and_dhash_equal_imagehash_below_the_reduction_size():
    # pHash resizes to 32x32: Pillow's reducing_gap=3 box-reduces only from 192 pixels a side.
    imagehash = pytest.importorskip("imagehash")
    for data in SMALL:
        image = decode_image(data)
        assert phash64(image) == int(str(imagehash.phash(image)), 16)
    # dhash resizes to 9x8, so Pillow's box reduction starts at 54 x 48 pixels.
    for data in SMALL:
        image = decode_image(data).resize((53, 47))
        assert dhash64(image) == int(str(imagehash.dhash(image)), 16)


def test_phash_stays_close_to_imagehash_on_large_images():
    imagehash = pytest.importorskip("imagehash")
    distances = [
        hamming(phash64(decode_image(data)), int(str(imagehash.phash(decode_image(data))), 16))
        for data in image_set().values()
    ]
    assert max(distances) <= 8, distances


def test_near_duplicates_are_close_and_different_images_are_far():
    originals = [jpeg_image(640, 480, seed=s) for s in range(6)]
    hashes = [phash64(decode_image(d)) for d in originals]
    for data, h in zip(originals, hashes, strict=True):
        copy = decode_image(near_duplicate(data, scale=0.6, quality=60))
        assert hamming(h, phash64(copy)) <= 6
        assert hamming(dhash64(decode_image(data)), dhash64(copy)) <= 10
    far = [hamming(a, b) for i, a in enumerate(hashes) for b in hashes[i + 1 :]]
    assert min(far) > 16, far


def test_phash_many_equals_one_at_a_time_and_is_uint64():
    images = [decode_image(d) for d in image_set().values()]
    many = phash_many(images)
    assert many.dtype == np.uint64 and many.shape == (len(images),)
    assert [int(h) for h in many] == [phash64(image) for image in images]
    assert phash_many([]).shape == (0,)


def test_phash_bytes_is_close_to_the_full_decode():
    for data in image_set().values():
        assert hamming(phash_bytes(data), phash64(decode_image(data))) <= 8


def test_band_widths_cover_64_bits():
    for bands in range(2, 65):
        widths = band_widths(bands)
        assert sum(widths) == 64 and len(widths) == bands and max(widths) - min(widths) <= 1
    with pytest.raises(ValueError):
        band_widths(1)


@given(h=st.integers(0, 2**64 - 1), bands=st.integers(2, 16), seed=st.integers(0, 10**6))
def test_pigeonhole_hashes_closer_than_bands_share_a_key(h, bands, seed):
    rng = random.Random(seed)
    distance = rng.randrange(bands)
    other = h
    for bit in rng.sample(range(64), distance):
        other ^= 1 << bit
    assert hamming(h, other) == distance
    keys, other_keys = band_keys(h, bands), band_keys(other, bands)
    assert set(keys) & set(other_keys)
    assert all(0 <= k < 2**63 for k in keys) and len(set(keys)) == bands


def test_banding_can_miss_at_the_distance_of_the_band_count():
    # Flip one bit in each of 4 bands: distance 4, no band identical, so 4 bands give no shared key.
    h = 0
    other = sum(1 << (63 - 16 * band) for band in range(4))
    assert hamming(h, other) == 4
    assert not set(band_keys(h, 4)) & set(band_keys(other, 4))
    assert set(band_keys(h, bands_for_distance(4))) & set(band_keys(other, bands_for_distance(4)))


@given(h=st.integers(0, 2**64 - 1))
def test_int64_round_trip(h):
    signed = as_int64(h)
    assert -(2**63) <= signed < 2**63 and as_uint64(signed) == h
