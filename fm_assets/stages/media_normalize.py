"""media_normalize: images resized and re-encoded, audio resampled to 16 kHz mono, per versioned policies.

``ImageResizePolicy`` (shorter side to S, long side capped, JPEG quality, resampling filter, Pillow version)
and ``AudioNormalizePolicy`` (target rate, mono, codec, the resampler: scipy's polyphase ``resample_poly``
with a Kaiser window, libsndfile version) are the stage config, so a policy change recomputes this stage and
what follows. The normalized bytes go into the record (``norm_data``, with ``norm_sha256``; the raw
``media_sha256`` stays as provenance), so they are covered by the unit markers like every output byte (``fm
verify`` checks them, ``fm repair`` recomputes them); parts roll every ``NORMALIZED_PART_BYTES`` of media. The
record's shape columns describe the normalized media. Video clips pass unchanged (``media_clip`` already
wrote their normalised keyframe strip).
"""

from __future__ import annotations

import hashlib
from typing import Any

from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.verdict import Verdict
from fm_assets.stages.media_validate import read_media
from fm_assets.transforms.audio.resample import AudioNormalizePolicy, normalize_audio
from fm_assets.transforms.image.decode import DEFAULT_MAX_PIXELS
from fm_assets.transforms.image.resize import ImageResizePolicy, normalize_image
from fm_assets.transforms.media_errors import MediaError
from fm_assets.transforms.readers.media_types import IMAGE, MEDIA_SCHEMA, VIDEO

IMAGE_POLICY = ImageResizePolicy()
AUDIO_POLICY = AudioNormalizePolicy()
NORMALIZED_PART_BYTES = 64 << 20  # bounds what a unit buffers and what a media_shard unit reads
EXTENSION = {"jpeg": "jpg", "png": "png", "flac": "flac", "wav": "wav"}


class MediaNormalizeStage(RecordStage):
    name = "media_normalize"
    code_version = (
        "media-normalize-v5"  # v3: rejects name the landed file; v4: video clips; v5: clip_* columns
    )
    upstream = "media_near_dedup"
    description = (
        "Image resize policy and audio resample to 16 kHz mono (policies in the stage key); bytes to the CAS."
    )
    output_schema = MEDIA_SCHEMA

    def bytes_per_file(self, ctx: StageContext) -> int | None:
        return NORMALIZED_PART_BYTES

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "image": IMAGE_POLICY.config(),
            "audio": AUDIO_POLICY.config(),
            "max_pixels": DEFAULT_MAX_PIXELS,
            "part_bytes": NORMALIZED_PART_BYTES,
        }

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        if record["modality"] == VIDEO:  # media_clip wrote the normalised keyframe strip
            return Verdict.kept(record)
        data = read_media(ctx.store, record["media_sha256"])
        try:
            if record["modality"] == IMAGE:
                image = normalize_image(data, IMAGE_POLICY, DEFAULT_MAX_PIXELS)
                encoded, ext = image.data, EXTENSION[image.format]
                shape: dict[str, Any] = {
                    "width": image.width,
                    "height": image.height,
                    "media_format": image.format,
                }
            else:
                audio = normalize_audio(data, AUDIO_POLICY)
                encoded, ext = audio.data, EXTENSION[AUDIO_POLICY.codec]
                shape = {
                    "sample_rate": audio.sample_rate,
                    "channels": audio.channels,
                    "duration_s": audio.duration_s,
                    "media_format": AUDIO_POLICY.codec,
                }
        except MediaError as error:
            return Verdict.drop(error.reason, error.details)
        digest = hashlib.sha256(encoded).hexdigest()
        metrics["bytes_out"] = metrics.get("bytes_out", 0) + len(encoded)
        metrics["bytes_in"] = metrics.get("bytes_in", 0) + len(data)
        return Verdict.kept(
            {
                **record,
                **shape,
                "norm_sha256": digest,
                "norm_ext": ext,
                "norm_bytes": len(encoded),
                "norm_data": encoded,
            }
        )


STAGE = MediaNormalizeStage()
