"""media_clip: cut each video into fixed-window clips and extract every clip's keyframes; other media pass.

One video record in, one record per clip out (``ClipPolicy``: window, keyframes per clip, normalised short
side, JPEG quality; its ``config()`` with the Pillow and PyAV versions is the stage config). A clip record
keeps the video's provenance (``cas_hash``, ``media_sha256``) and adds ``clip_index``, ``clip_start_s`` /
``clip_end_s``, the keyframe strip (``norm_data``, ``norm_ext = strip.jpg``, one JPEG of the F keyframes
stacked vertically), the keyframes' pHashes (``keyframe_phashes``, all of which ``media_near_dedup`` compares;
``phash`` is the middle one's) and the motion / blank measurements ``media_filter`` judges. The clip id is ``<video id>@c<NNN>`` (the
revocation blast radius maps it back to its video as it maps a packed piece to its document). A
video shorter than one clip is a ``video_too_short`` reject; a video that no longer decodes is
``corrupt_video``. With ``FM_VIDEO_STORE_CLIPS=1`` (``ClipPolicy.store_clip``, in the key) a clip record also
holds the clip re-encoded (``clip_data``, ``clip_ext = clip.mp4``, ``clip_sha256``); with
``FM_VIDEO_CUTS=shots`` (``ClipPolicy.cuts``, in the key) clips are cut at shot boundaries, each shot in windows. Accounting counts videos: ``records_out`` is the videos (and images, audio) that gave
output, the rows written are the clips.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult
from fm_assets.settings import PipelineSettings
from fm_assets.stages.media_normalize import NORMALIZED_PART_BYTES
from fm_assets.stages.media_validate import read_media
from fm_assets.transforms.media_errors import MediaError
from fm_assets.transforms.readers.media_types import MEDIA_SCHEMA, VIDEO
from fm_assets.transforms.video.clips import CLIP_EXT, STRIP_EXT, Clip, ClipPolicy, extract_clips
from fm_assets.transforms.video.rules import VIDEO_TOO_SHORT

CLIP_POLICY = ClipPolicy()


def clip_policy(settings: PipelineSettings) -> ClipPolicy:
    """The stage's policy: ``CLIP_POLICY`` with the clip stored and cut at shots when the settings ask."""
    return replace(CLIP_POLICY, store_clip=settings.video_store_clips, cuts=settings.video_cuts)


def clip_id(video_id: str, index: int) -> str:
    return f"{video_id}@c{index:03d}"


def clip_record(record: dict[str, Any], clip: Clip) -> dict[str, Any]:
    """The record of one clip of the video ``record``."""
    return {
        **record,
        "doc_id": clip_id(record["doc_id"], clip.index),
        "clip_index": clip.index,
        "clip_start_s": clip.start_s,
        "clip_end_s": clip.end_s,
        "keyframes": clip.keyframes,
        "keyframe_phashes": list(clip.phashes),
        "phash": clip.phashes[len(clip.phashes) // 2],
        "metrics": json.dumps({"motion": clip.motion, "blank_fraction": clip.blank_fraction}, sort_keys=True),
        "norm_sha256": hashlib.sha256(clip.strip).hexdigest(),
        "norm_ext": STRIP_EXT,
        "norm_bytes": len(clip.strip),
        "norm_data": clip.strip,
        "clip_sha256": hashlib.sha256(clip.clip).hexdigest() if clip.clip else None,
        "clip_ext": CLIP_EXT if clip.clip else None,
        "clip_bytes": len(clip.clip) if clip.clip else None,
        "clip_data": clip.clip,
    }


class MediaClipStage(Stage):
    name = "media_clip"
    code_version = "media-clip-v2"  # v2: optional re-encoded clip (clip_* fields)
    upstream = "media_validate"
    description = "Videos -> fixed-window clips with F evenly spaced keyframes (one JPEG strip); others pass."
    output_schema = MEDIA_SCHEMA

    def bytes_per_file(self, ctx: StageContext) -> int | None:
        return NORMALIZED_PART_BYTES

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"clips": clip_policy(ctx.settings).config(), "part_bytes": NORMALIZED_PART_BYTES}

    def process(self, unit: UnitContext) -> UnitResult:
        policy = clip_policy(unit.settings)
        records_in = records_out = 0
        metrics: dict[str, Any] = {"videos": 0, "clips": 0, "video_seconds": 0.0}
        for part in unit.unit.inputs:
            for record in unit.iter_rows(part):
                records_in += 1
                if record["modality"] != VIDEO:
                    unit.write(record)
                    records_out += 1
                    continue
                duration = float(record["duration_s"])
                if not policy.windows(duration):  # no clip under any cut: shorter than min_clip_s
                    unit.reject(
                        record,
                        VIDEO_TOO_SHORT,
                        {"value": duration, "threshold": policy.min_clip_s, "rule": "min_clip_s"},
                    )
                    continue
                try:
                    clips = extract_clips(read_media(unit.store, record["media_sha256"]), duration, policy)
                except MediaError as error:
                    unit.reject(record, error.reason, error.details)
                    continue
                for clip in clips:
                    unit.write(clip_record(record, clip))
                records_out += 1
                metrics["videos"] += 1
                metrics["clips"] += len(clips)
                metrics["video_seconds"] = round(metrics["video_seconds"] + duration, 6)
        return UnitResult(records_in=records_in, records_out=records_out, extra=metrics)


STAGE = MediaClipStage()
