"""Image-text quality rules: size, aspect ratio, near-blank and low-entropy images, caption length and language.

Measurements are on the decoded RGB image's 8-bit luma (Pillow's ITU-R 601 "L" conversion):
``pixel_std`` is the standard deviation of luma (0 for a flat image), ``entropy_bits`` the Shannon
entropy of its 256-bin histogram (0 for one grey level, 8 at most). Both are computed by Pillow in
C, so they are exact and identical on every machine.

The defaults are calibrated on the debian-handbook figures (361 distinct diagrams and screenshots):
line art on a white page has little histogram entropy (0.16 to 2 bits, median 2.0) yet a high luma
deviation (12 to 60), so the entropy floor is low (0.1 bits) and catches near-constant images that the
deviation floor (3.0, flat colour with faint noise) lets through; neither judges what a picture shows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from PIL import Image, ImageStat

from fm_assets.engine.verdict import Verdict
from fm_assets.transforms.image.decode import ImageInfo
from fm_assets.transforms.text.langid import detect_language


@dataclass(frozen=True)
class ImageRules:
    """Thresholds for ``judge_image``; ``config()`` goes into the stage key."""

    version: str = "image-rules-v1"
    min_side: int = 64
    max_aspect_ratio: float = 4.0  # long side / short side
    min_entropy_bits: float = 0.1  # line art on white measures 0.3-2 bits; see the module docstring
    min_pixel_std: float = 3.0
    caption_min_chars: int = 3
    caption_max_chars: int = 2000
    caption_languages: tuple[str, ...] = field(default=())  # ISO 639-1 codes; empty = any language
    caption_min_language_score: float = 0.0

    def config(self) -> dict[str, Any]:
        config = asdict(self)
        config["caption_languages"] = list(self.caption_languages)
        return config


def luma_stats(image: Image.Image) -> tuple[float, float]:
    """(standard deviation of luma, Shannon entropy in bits of the luma histogram)."""
    gray = image if image.mode == "L" else image.convert("L")
    histogram = gray.histogram()
    total = sum(histogram)
    entropy = -sum((n / total) * math.log2(n / total) for n in histogram if n) if total else 0.0
    std = float(ImageStat.Stat(gray).stddev[0])
    return std, entropy + 0.0  # + 0.0 turns -0.0 into 0.0


def judge_image(image: Image.Image, info: ImageInfo, caption: str, rules: ImageRules) -> Verdict:
    """Keep the pair, or the first failed rule with its measured value and threshold.

    Sizes are the decoded image's (EXIF orientation applied); ``info`` adds the source format.
    """
    width, height = image.size
    short, long = min(width, height), max(width, height)
    if short < rules.min_side:
        return Verdict.over_limit("image_too_small", short, rules.min_side, width=width, height=height)
    aspect = long / short
    if aspect > rules.max_aspect_ratio:
        return Verdict.over_limit(
            "aspect_ratio_too_extreme", round(aspect, 4), rules.max_aspect_ratio, width=width, height=height
        )
    std, entropy = luma_stats(image)
    if std < rules.min_pixel_std:
        return Verdict.over_limit("near_blank_image", round(std, 4), rules.min_pixel_std)
    if entropy < rules.min_entropy_bits:
        return Verdict.over_limit("low_entropy_image", round(entropy, 4), rules.min_entropy_bits)
    text = caption.strip()
    if len(text) < rules.caption_min_chars:
        return Verdict.over_limit("caption_too_short", len(text), rules.caption_min_chars)
    if len(text) > rules.caption_max_chars:
        return Verdict.over_limit("caption_too_long", len(text), rules.caption_max_chars)
    measurements: dict[str, Any] = {
        "format": info.format,
        "width": width,
        "height": height,
        "pixel_std": round(std, 4),
        "entropy_bits": round(entropy, 4),
        "caption_chars": len(text),
    }
    if rules.caption_languages or rules.caption_min_language_score > 0:
        lang, score = detect_language(text)
        if rules.caption_languages and lang not in rules.caption_languages:
            return Verdict.over_limit(
                "caption_language_not_allowed", lang, list(rules.caption_languages), score=round(score, 4)
            )
        if score < rules.caption_min_language_score:
            return Verdict.over_limit(
                "caption_language_low_confidence",
                round(score, 4),
                rules.caption_min_language_score,
                lang=lang,
            )
        measurements.update(caption_lang=lang, caption_lang_score=round(score, 4))
    return Verdict.kept(measurements=measurements)
