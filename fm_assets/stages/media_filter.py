"""media_filter: quality rules per modality, every drop with the rule's reason, measured value and threshold.

Images (``transforms.image.rules``): minimum side, maximum aspect ratio, near-blank / low-entropy pixels,
caption length (and language when configured). Video (``transforms.video.rules``): duration and
resolution of the whole file (what ``media_validate`` measured), then each clip's motion score and share of
blank keyframes (what ``media_clip`` measured): ``static_clip``, ``blank_frames``. Audio (``transforms.audio.rules``): duration bounds, sample
rate, silence fraction, clipping, an SNR estimate, transcript length. The rule sets' ``config()`` (their
versions and thresholds) is the stage config, so changing a threshold recomputes this stage and what follows.
A kept sample's measurements go to its ``metrics`` column.
"""

from __future__ import annotations

import json
from typing import Any

from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.verdict import Verdict
from fm_assets.stages.media_validate import read_media
from fm_assets.transforms.audio.decode import decode_audio
from fm_assets.transforms.audio.rules import AudioRules, judge_audio
from fm_assets.transforms.image.decode import DEFAULT_MAX_PIXELS, decode_image, probe_image
from fm_assets.transforms.image.rules import ImageRules, judge_image
from fm_assets.transforms.media_errors import MediaError
from fm_assets.transforms.readers.media_types import IMAGE, MEDIA_SCHEMA, VIDEO
from fm_assets.transforms.video.rules import VideoRules, judge_clip, judge_video

IMAGE_RULES = ImageRules()
AUDIO_RULES = AudioRules()
VIDEO_RULES = VideoRules()


class MediaFilterStage(RecordStage):
    name = "media_filter"
    code_version = "media-filter-v3"
    upstream = "media_clip"
    description = (
        "Image rules (size, aspect, blank, caption) and audio rules (duration, silence, clipping, SNR)."
    )
    output_schema = MEDIA_SCHEMA

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "image": IMAGE_RULES.config(),
            "audio": AUDIO_RULES.config(),
            "video": VIDEO_RULES.config(),
            "max_pixels": DEFAULT_MAX_PIXELS,
        }

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        if record["modality"] == VIDEO:
            return self._answer(record, self._video(record), metrics)
        data = read_media(ctx.store, record["media_sha256"])
        try:
            if record["modality"] == IMAGE:
                info = probe_image(data, DEFAULT_MAX_PIXELS)
                verdict = judge_image(
                    decode_image(data, DEFAULT_MAX_PIXELS), info, record["text"], IMAGE_RULES
                )
            else:
                samples, rate = decode_audio(data)
                verdict = judge_audio(samples, rate, record["text"], AUDIO_RULES)
        except MediaError as error:  # decoded in media_validate; only a changed decoder gets here
            return Verdict.drop(error.reason, error.details)
        return self._answer(record, verdict, metrics)

    @staticmethod
    def _video(record: dict[str, Any]) -> Verdict:
        """A clip: its video's duration and resolution, then its own motion and blank keyframes."""
        verdict = judge_video(record["duration_s"], record["width"], record["height"], VIDEO_RULES)
        if not verdict.keep:
            return verdict
        measured = json.loads(record["metrics"])
        clip = judge_clip(measured["motion"], measured["blank_fraction"], VIDEO_RULES)
        return Verdict.kept(measurements={**verdict.details, **clip.details}) if clip.keep else clip

    @staticmethod
    def _answer(record: dict[str, Any], verdict: Verdict, metrics: dict[str, Any]) -> Verdict:
        if not verdict.keep:
            return verdict
        metrics["kept_" + record["modality"]] = metrics.get("kept_" + record["modality"], 0) + 1
        measured = json.dumps(dict(verdict.details), sort_keys=True, default=float)
        return Verdict.kept({**record, "metrics": measured})


STAGE = MediaFilterStage()
