"""The ``video`` section of a video-text release's ``card.json``: how many clips, how many seconds of video
they cover, their keyframe counts, and how many re-encoded clips (``FM_VIDEO_STORE_CLIPS=1``) the release
carries and their bytes.

Read from each released batch's ``media_normalize`` output (the rows its ``media_shard`` output was built
from; only the few columns named here, never the media bytes), the same rows the Lance ``videos`` view reads.
"""

from __future__ import annotations

from typing import Any

from fm_assets.datasets.media_views import NORMALIZE_STAGE, SHARD_STAGE, iter_part_rows
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.readers.media_types import VIDEO

_COLUMNS = ["modality", "clip_start_s", "clip_end_s", "keyframes", "clip_bytes"]


def video_card_section(store: ObjectStore, batches: list[str]) -> dict[str, Any]:
    """Clips, clip seconds, keyframe counts and the stored clips (count and bytes) of ``batches``."""
    clips = stored = stored_bytes = 0
    seconds = 0.0
    keyframes: set[int] = set()
    for batch in batches:
        normalized = read_success(store, NORMALIZE_STAGE, batch)
        if read_success(store, SHARD_STAGE, batch).inputs.get(NORMALIZE_STAGE) != normalized.data_version:
            raise RuntimeError(
                f"{SHARD_STAGE}[{batch}] was not built from the current {NORMALIZE_STAGE} output; fm run {batch}"
            )
        for row in iter_part_rows(store, list(normalized.parts), _COLUMNS):
            if row["modality"] != VIDEO:
                continue
            clips += 1
            seconds += row["clip_end_s"] - row["clip_start_s"]
            keyframes.add(int(row["keyframes"]))
            if row["clip_bytes"]:
                stored += 1
                stored_bytes += int(row["clip_bytes"])
    return {
        "clips": clips,
        "clip_seconds": round(seconds, 3),
        "keyframes_per_clip": sorted(keyframes),
        "stored_clips": stored,
        "stored_clip_bytes": stored_bytes,
    }
