"""The video rules: a whole video (duration, resolution) in ``media_filter``, a clip (near-static, blank
keyframes) in ``media_clip``; every drop carries the measured value and the threshold."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from fm_assets.engine.verdict import Verdict

VIDEO_TOO_SHORT = "video_too_short"
RESOLUTION_TOO_SMALL = "resolution_too_small"
STATIC_CLIP = "static_clip"
BLANK_FRAMES = "blank_frames"


@dataclass(frozen=True)
class VideoRules:
    version: str = "video-rules-v1"
    min_duration_s: float = 1.0
    min_short_side: int = 32
    min_motion: float = 0.002  # mean |luma difference| between consecutive keyframes, 0..1
    max_blank_fraction: float = 0.5  # share of a clip's keyframes that are black or uniform

    def config(self) -> dict[str, Any]:
        return asdict(self)


def judge_video(duration_s: float, width: int, height: int, rules: VideoRules) -> Verdict:
    """A whole video: long enough and large enough."""
    if duration_s < rules.min_duration_s:
        return Verdict.over_limit(VIDEO_TOO_SHORT, duration_s, rules.min_duration_s)
    if min(width, height) < rules.min_short_side:
        return Verdict.over_limit(RESOLUTION_TOO_SMALL, [width, height], rules.min_short_side)
    return Verdict.kept(measurements={"duration_s": duration_s, "short_side": min(width, height)})


def judge_clip(motion: float, blank_fraction: float, rules: VideoRules) -> Verdict:
    """One clip: moving and not mostly blank."""
    if blank_fraction > rules.max_blank_fraction:
        return Verdict.over_limit(BLANK_FRAMES, blank_fraction, rules.max_blank_fraction)
    if motion < rules.min_motion:
        return Verdict.over_limit(STATIC_CLIP, motion, rules.min_motion)
    return Verdict.kept(measurements={"motion": motion, "blank_fraction": blank_fraction})
