"""media_dedup: exact duplicates by the sha256 of the raw media bytes, within the batch and across batches.

The same stage as text ``dedup`` (``engine.kinds.exact_dedup``) keyed by ``media_sha256``: each batch leaves
``kept_media.parquet`` (the hashes it kept) for later batches. The same image with two captions is one
image: the first pair is kept. A video's clips are keyed by the video file's sha256 and the clip index, so
every clip of a duplicate video file is removed, within the batch and across batches.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.kinds.exact_dedup import DedupKey, ExactDedupStage
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.readers.media_types import MEDIA_SCHEMA

KEPT_MEDIA = "kept_media.parquet"
MAX_DUPLICATE_RATE = 0.5  # more than this share of a batch duplicated suggests a re-delivery


def check_duplicate_rate(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Share of the stage's input removed as duplicates (a warning above ``MAX_DUPLICATE_RATE``)."""
    counts = success.counts
    rate = counts.records_rejected / counts.records_in if counts.records_in else 0.0
    return CheckOutcome(
        rate <= MAX_DUPLICATE_RATE,
        {
            "duplicate_rate": round(rate, 4),
            "threshold": MAX_DUPLICATE_RATE,
            "samples": counts.records_in,
            "by_reason": success.rejects_by_reason,
        },
        f"share of samples removed as duplicates is at most {MAX_DUPLICATE_RATE}",
    )


DUPLICATE_RATE_CHECK = StageCheck(
    "duplicate_rate",
    f"at most {MAX_DUPLICATE_RATE:.0%} of the batch's samples are duplicates",
    check_duplicate_rate,
    blocking=False,
    warn_only=True,
)


def media_key(media_sha256: str, clip_index: int | None) -> str:
    """An image's or audio clip's raw sha256; a video clip's is ``<sha256>#<clip index>`` (the same file cut
    the same way gives the same clips, so a duplicate file's clips all go)."""
    return media_sha256 if clip_index is None else f"{media_sha256}#{clip_index}"


class MediaDedupStage(ExactDedupStage):
    name = "media_dedup"
    code_version = "media-dedup-v5"  # v3: rejects name the landed file; v4: video clips; v5: clip_* columns
    upstream = "media_filter"
    description = "Exact dedup of media by raw-bytes sha256, within the batch and across all earlier batches."
    output_schema = MEDIA_SCHEMA
    checks = (DUPLICATE_RATE_CHECK,)
    dedup_key = DedupKey(
        column="media_sha256",
        index_file=KEPT_MEDIA,
        index_field=pa.field("media_sha256", pa.string()),
        artifact="kept_media",
        of=media_key,
        also=("clip_index",),
        in_details=True,
    )


STAGE = MediaDedupStage()
