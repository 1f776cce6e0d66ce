"""media_validate: decode every sample's media; shape, format, duration and sample rate into the record.

Images are opened under a pixel budget (``max_pixels``: a decompression bomb is a reject, not an OOM),
fully decoded (truncated or corrupt data is a reject) and get their 64-bit pHash and dHash here, while the
pixels are in memory. Audio is probed and decoded (zero-length, unsupported codec and corrupt data are
rejects). Video is probed with PyAV from its header and packets, never fully decoded
(``transforms.video.probe``: codec, duration, frame rate, resolution, frame count, audio track;
``resolution_too_large`` is refused from the header). Every reject carries the decoder's reason and details; the ``decode_failure_rate`` check reports
the share that failed.
"""

from __future__ import annotations

import hashlib
from typing import Any

from fm_assets.engine import layout
from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.engine.verdict import Verdict
from fm_assets.transforms.audio.decode import decode_audio, probe_audio
from fm_assets.transforms.image.decode import DEFAULT_MAX_PIXELS, decode_image, probe_image
from fm_assets.transforms.image.phash import dhash64, phash64
from fm_assets.transforms.media_errors import MediaError
from fm_assets.transforms.readers.media_types import IMAGE, MEDIA_SCHEMA, VIDEO
from fm_assets.transforms.video.probe import VideoLimits, probe_video

VIDEO_LIMITS = VideoLimits()
MAX_DECODE_FAILURE_RATE = 0.5  # above this share the batch's media is suspect (wrong delivery, broken export)


class CasObjectDamaged(RuntimeError):
    """A CAS object's bytes are not its name: storage damage, never a property of the sample."""


def read_media(store: ObjectStore, sha: str) -> bytes:
    """The CAS object ``sha``, verified against its name."""
    data = store.read_bytes(layout.cas_object(sha))
    if hashlib.sha256(data).hexdigest() != sha:
        raise CasObjectDamaged(
            f"{store.uri(layout.cas_object(sha))} does not hash to its name; re-land its batch"
        )
    return data


def check_decode_failure_rate(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    counts = success.counts
    rate = counts.records_rejected / counts.records_in if counts.records_in else 0.0
    return CheckOutcome(
        rate <= MAX_DECODE_FAILURE_RATE,
        {
            "decode_failure_rate": round(rate, 4),
            "threshold": MAX_DECODE_FAILURE_RATE,
            "samples": counts.records_in,
            "failures_by_reason": success.rejects_by_reason,
        },
        f"share of media samples that do not decode is at most {MAX_DECODE_FAILURE_RATE}",
    )


class MediaValidateStage(RecordStage):
    name = "media_validate"
    code_version = (
        "media-validate-v5"  # v3: rejects name the landed file; v4: video clips; v5: clip_* columns
    )
    upstream = "media_land"
    description = (
        "Decode images (pixel budget, pHash/dHash) and audio (rate, channels, duration), probe video; failures"
        " rejected."
    )
    output_schema = MEDIA_SCHEMA
    checks = (
        StageCheck(
            "decode_failure_rate",
            f"at most {MAX_DECODE_FAILURE_RATE:.0%} of media samples fail to decode",
            check_decode_failure_rate,
            blocking=False,
            warn_only=True,
        ),
    )

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "max_pixels": DEFAULT_MAX_PIXELS,
            "hashes": ["phash64", "dhash64"],
            "video": VIDEO_LIMITS.config(),
        }

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        data = read_media(ctx.store, record["media_sha256"])
        try:
            if record["modality"] == IMAGE:
                fields = self._image(data)
            elif record["modality"] == VIDEO:
                fields = self._video(data)
            else:
                fields = self._audio(data)
        except MediaError as error:
            return Verdict.drop(error.reason, {**error.details, "modality": record["modality"]})
        metrics[f"{record['modality']}s_decoded"] = metrics.get(f"{record['modality']}s_decoded", 0) + 1
        return Verdict.kept({**record, **fields})

    @staticmethod
    def _image(data: bytes) -> dict[str, Any]:
        info = probe_image(data, DEFAULT_MAX_PIXELS)
        image = decode_image(data, DEFAULT_MAX_PIXELS)
        return {
            "media_format": info.format,
            "width": image.size[0],  # after EXIF orientation, as trained on
            "height": image.size[1],
            "phash": phash64(image),
            "dhash": dhash64(image),
        }

    @staticmethod
    def _video(data: bytes) -> dict[str, Any]:
        info = probe_video(data, VIDEO_LIMITS)
        return {
            "media_format": info.media_format,
            "width": info.width,
            "height": info.height,
            "duration_s": info.duration_s,
            "fps": info.fps,
            "frame_count": info.frames,
            "has_audio": info.has_audio,
        }

    @staticmethod
    def _audio(data: bytes) -> dict[str, Any]:
        info = probe_audio(data)
        decode_audio(data)  # the header can promise frames the body does not hold
        return {
            "media_format": f"{info.format}/{info.subtype}",
            "sample_rate": info.sample_rate,
            "channels": info.channels,
            "duration_s": info.duration_s,
        }


STAGE = MediaValidateStage()
