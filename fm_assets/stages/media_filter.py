"""media_filter: quality rules per modality, every drop with the rule's reason, measured value and threshold.

Images (``transforms.image.rules``): minimum side, maximum aspect ratio, near-blank / low-entropy pixels,
caption length (and language when configured). Video (``transforms.video.rules``): duration and
resolution of the whole file (what ``media_validate`` measured), then each clip's motion score and share of
blank keyframes (what ``media_clip`` measured): ``static_clip``, ``blank_frames``. Audio (``transforms.audio.rules``): duration bounds, sample
rate, silence fraction, clipping, an SNR estimate, transcript length. The rule sets' ``config()`` (their
versions and thresholds) is the stage config, so changing a threshold recomputes this stage and what follows.
A kept sample's measurements go to its ``metrics`` column.

Revocations (``fm revoke``) are judged first: the recorded revocations that can match the batch are a side
input (``compliance.revocations.revocation_blocklists``, the list the text ``blocklist`` stage merges), so a
new revocation re-keys this stage and what follows; a sample of a revoked (source, licence) pair is dropped as
``revoked_license``, one whose raw media sha256 (its CAS hash) is a revoked hash as ``blocked_doc_hash``.
"""

from __future__ import annotations

import json
from typing import Any

from fm_assets.compliance.revocations import revocation_blocklists, revoked_by
from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.stage import SideInputs, StageContext
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
    # v3: rejects name the landed file; v4: revocations; v5: video clips; v6: clip_* columns
    code_version = "media-filter-v6"
    upstream = "media_clip"
    description = (
        "Revocations; image rules (size, aspect, blank, caption) and audio rules (duration, silence, "
        "clipping, SNR)."
    )
    output_schema = MEDIA_SCHEMA
    side_input_assets = ("blocklists",)

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        revoked = revocation_blocklists(ctx.store, ctx.batch)  # `fm revoke` records that can match this batch
        return SideInputs({"revocations": revoked.fingerprint()}, revoked)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "image": IMAGE_RULES.config(),
            "audio": AUDIO_RULES.config(),
            "video": VIDEO_RULES.config(),
            "max_pixels": DEFAULT_MAX_PIXELS,
        }

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        revoked = revoked_by(ctx.side.data, record["source"], record["license"], record["media_sha256"])
        if revoked is not None:
            return Verdict.drop(*revoked)
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
