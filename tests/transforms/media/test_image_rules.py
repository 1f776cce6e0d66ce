"""Image-text rules: each rule drops with its reason, the measured value and the threshold; good pairs pass."""

import io
import json

import numpy as np
import pytest
from media_fixtures import blank_png, image_set, png_image
from PIL import Image

from fm_assets.engine.verdict import Verdict
from fm_assets.transforms.image.decode import decode_image, probe_image
from fm_assets.transforms.image.rules import ImageRules, judge_image, luma_stats

CAPTION = "The aptitude package manager showing the list of installed packages"


def judge(data: bytes, caption: str = CAPTION, **rules):
    return judge_image(decode_image(data), probe_image(data), caption, ImageRules(**rules))


@pytest.mark.parametrize("name", sorted(image_set()))
def test_structured_images_with_a_caption_are_kept_with_measurements(name):
    verdict = judge(image_set()[name])
    assert verdict.keep and verdict.reason is None
    assert verdict.details["pixel_std"] > 20 and verdict.details["entropy_bits"] > 5


def test_min_side_is_inclusive():
    small = png_image(96, 80)
    assert judge(small, min_side=80).keep
    verdict = judge(small, min_side=81)
    assert (verdict.reason, verdict.details["value"], verdict.details["threshold"]) == (
        "image_too_small",
        80,
        81,
    )


def test_aspect_ratio():
    wide = png_image(900, 300)
    assert judge(wide, max_aspect_ratio=3.0).keep
    verdict = judge(wide, max_aspect_ratio=2.5)
    assert verdict.reason == "aspect_ratio_too_extreme" and verdict.details["value"] == 3.0


def test_blank_image_is_near_blank():
    verdict = judge(blank_png())
    assert verdict.reason == "near_blank_image" and verdict.details["value"] == 0.0


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def test_two_tone_image_has_contrast_but_one_bit_of_entropy():
    pixels = np.zeros((128, 128, 3), np.uint8)
    pixels[:, 64:] = 255
    verdict = judge(_png(pixels), min_entropy_bits=1.5)
    assert verdict.reason == "low_entropy_image"
    assert verdict.details == {"value": 1.0, "threshold": 1.5}
    assert judge(_png(pixels), min_entropy_bits=1.0).keep


def test_a_few_specks_on_a_flat_page_are_low_entropy():
    pixels = np.full((200, 200, 3), 255, np.uint8)
    pixels[::10, ::10] = 0  # 1% black dots: luma deviation 25, entropy 0.08 bits
    verdict = judge(_png(pixels))
    assert verdict.reason == "low_entropy_image" and verdict.details["value"] < 0.1


def test_luma_stats_match_numpy():
    image = decode_image(png_image(200, 100, seed=9))
    gray = np.asarray(image.convert("L"), dtype=np.float64)
    counts = np.bincount(gray.astype(np.int64).ravel(), minlength=256)
    p = counts[counts > 0] / counts.sum()
    std, entropy = luma_stats(image)
    assert std == pytest.approx(gray.std(), rel=1e-9)
    assert entropy == pytest.approx(-(p * np.log2(p)).sum(), rel=1e-9)


def test_caption_length_bounds():
    data = png_image(128, 128)
    short = judge(data, caption="  ab ")
    assert (short.reason, short.details["value"], short.details["threshold"]) == ("caption_too_short", 2, 3)
    long = judge(data, caption="x" * 51, caption_max_chars=50)
    assert (long.reason, long.details["value"]) == ("caption_too_long", 51)


def test_caption_language_uses_the_project_language_id():
    data = png_image(128, 128)
    assert judge(data, caption_languages=("en",)).details["caption_lang"] == "en"
    french = judge(
        data, caption="Le gestionnaire de paquets aptitude et la liste des paquets", caption_languages=("en",)
    )
    assert french.reason == "caption_language_not_allowed" and french.details["value"] == "fr"
    assert french.details["threshold"] == ["en"]


def test_config_is_json_and_changes_with_a_threshold():
    base = ImageRules().config()
    assert json.loads(json.dumps(base)) == base
    assert ImageRules(min_side=65).config() != base
    assert base["version"] == "image-rules-v1"


def test_rules_answer_with_the_engine_verdict():
    dropped = judge(blank_png())
    assert isinstance(dropped, Verdict) and dropped.record is None
    assert not dropped.keep and dropped.reason == "near_blank_image" and dropped.details["threshold"] == 3.0
    kept = judge(png_image(128, 128))
    assert isinstance(kept, Verdict) and kept.keep and kept.record is None and "pixel_std" in kept.details
