"""The Lance media views: ``images`` (with a JPEG thumbnail per image), ``audio`` and ``videos`` (one row per
clip, its middle keyframe as the thumbnail, and whether the clip itself is stored: ``has_clip``, ``clip_bytes``,
``clip_sha256`` of the re-encoded ``<key>.clip.mp4`` of ``FM_VIDEO_STORE_CLIPS=1``), one row per released
sample, one set of datasets per release namespace.

Rows come from every batch's ``media_shard`` output (the sample's shard and position, shape, caption and its
token count, licence, namespace, raw and normalized hashes) plus the batch's source; each image's thumbnail
(and each clip's) is made from its normalized bytes, read from the ``media_normalize`` output the shards were built from. Like ``documents_lance``, a dataset records each batch's
``media_shard`` data version and a release rewrites only the batches whose version changed (``lance_sync``;
``VIEW_VERSION`` is the layout: a new column rewrites the views whole once); the write holds the ``lance``
lock. Rows stream batch by batch (bounded memory).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from fm_assets.compliance.namespaces import DEFAULT_NAMESPACE
from fm_assets.datasets.lance_sync import LanceView, sync_lance_batches
from fm_assets.datasets.views import LANCE_LOCK, stage_versions
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.landing import read_batch_manifest
from fm_assets.engine.locks import store_lock
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.image.resize import thumbnail
from fm_loader.media.buckets import DEFAULT_BUCKETS

SHARD_STAGE = "media_shard"
NORMALIZE_STAGE = "media_normalize"
THUMBNAIL_SIDE = 128
ROWS_PER_WRITE = 256
VIEW_VERSION = "media-views-v2"  # v2: the videos' has_clip / clip_bytes / clip_sha256

_COMMON = [
    pa.field("doc_id", pa.string()),
    pa.field("batch", pa.string()),
    pa.field("source", pa.string()),
    pa.field("license", pa.string()),
    pa.field("namespace", pa.string()),
    pa.field("shard", pa.string()),
    pa.field("sample_in_shard", pa.int32()),
    pa.field("media_sha256", pa.string()),
    pa.field("norm_sha256", pa.string()),
    pa.field("caption_tokens", pa.int32()),
]
IMAGES_SCHEMA = pa.schema(
    [
        *_COMMON,
        pa.field("caption", pa.large_string()),
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("bucket", pa.int32()),  # fm_loader.media's default aspect-ratio bucket
        pa.field("thumbnail", pa.binary()),  # JPEG, longest side THUMBNAIL_SIDE
    ]
)
AUDIO_SCHEMA = pa.schema(
    [
        *_COMMON,
        pa.field("transcript", pa.large_string()),
        pa.field("sample_rate", pa.int32()),
        pa.field("duration_s", pa.float64()),
    ]
)
VIDEOS_SCHEMA = pa.schema(
    [
        *_COMMON,
        pa.field("caption", pa.large_string()),
        pa.field("width", pa.int32()),  # the source video's
        pa.field("height", pa.int32()),
        pa.field("clip_start_s", pa.float64()),
        pa.field("clip_end_s", pa.float64()),
        pa.field("keyframes", pa.int32()),
        pa.field("thumbnail", pa.binary()),  # the middle keyframe, JPEG, longest side THUMBNAIL_SIDE
        pa.field("has_clip", pa.bool_()),  # the re-encoded clip is in the shard (FM_VIDEO_STORE_CLIPS=1)
        pa.field("clip_bytes", pa.int64()),  # its size and sha256 (null without it)
        pa.field("clip_sha256", pa.string()),
    ]
)
SCHEMAS = {"image": IMAGES_SCHEMA, "audio": AUDIO_SCHEMA, "video": VIDEOS_SCHEMA}
_NORMALIZED = [
    "doc_id",
    "modality",
    "norm_data",
    "clip_start_s",
    "clip_end_s",
    "keyframes",
    "clip_bytes",
    "clip_sha256",
]


def _middle_keyframe(strip: bytes, keyframes: int) -> Image.Image:
    with Image.open(io.BytesIO(strip)) as image:
        rgb = image.convert("RGB")
    height = rgb.height // max(keyframes, 1)
    top = height * (keyframes // 2)
    return rgb.crop((0, top, rgb.width, top + height))


def _view_row(
    modality: str, row: dict[str, Any], source: str, normalized: dict[str, Any] | None
) -> dict[str, Any]:
    common = {field.name: row.get(field.name) for field in _COMMON if field.name != "source"}
    common["source"] = source
    if modality == "audio":
        return {
            **common,
            "transcript": row["text"],
            "sample_rate": row["sample_rate"],
            "duration_s": row["duration_s"],
        }
    assert normalized is not None
    if modality == "video":
        keyframes = int(normalized["keyframes"])
        return {
            **common,
            "caption": row["text"],
            "width": row["width"],
            "height": row["height"],
            "clip_start_s": normalized["clip_start_s"],
            "clip_end_s": normalized["clip_end_s"],
            "keyframes": keyframes,
            "thumbnail": thumbnail(_middle_keyframe(normalized["norm_data"], keyframes), THUMBNAIL_SIDE),
            "has_clip": bool(normalized["clip_bytes"]),
            "clip_bytes": normalized["clip_bytes"] or None,
            "clip_sha256": normalized["clip_sha256"] if normalized["clip_bytes"] else None,
        }
    with Image.open(io.BytesIO(normalized["norm_data"])) as image:
        thumb = thumbnail(image.convert("RGB"), THUMBNAIL_SIDE)
    return {
        **common,
        "caption": row["text"],
        "width": row["width"],
        "height": row["height"],
        "bucket": DEFAULT_BUCKETS.bucket_of(row["width"], row["height"]),
        "thumbnail": thumb,
    }


def iter_part_rows(
    store: ObjectStore, parts: list[str], columns: list[str] | None = None
) -> Iterator[dict[str, Any]]:
    """The rows of a stage's Parquet parts (only ``columns``, when given), ``ROWS_PER_WRITE`` at a time."""
    for part in parts:
        with store.open(part) as handle:
            for record_batch in pq.ParquetFile(handle).iter_batches(
                batch_size=ROWS_PER_WRITE, columns=columns
            ):
                yield from record_batch.to_pylist()


def iter_view_batches(store: ObjectStore, modality: str, batches: list[str]) -> Iterator[pa.RecordBatch]:
    """The view's rows, batch by batch; images and clips read their bytes from ``media_normalize``'s output, the
    stage ``media_shard`` was built from (same samples, same order)."""
    schema = SCHEMAS[modality]
    for batch in batches:
        source = read_batch_manifest(store, batch).source
        shard = read_success(store, SHARD_STAGE, batch)
        normalized = read_success(store, NORMALIZE_STAGE, batch)
        if shard.inputs.get(NORMALIZE_STAGE) != normalized.data_version:
            raise RuntimeError(
                f"{SHARD_STAGE}[{batch}] was not built from the current {NORMALIZE_STAGE} output; fm run {batch}"
            )
        media = (
            r for r in iter_part_rows(store, list(normalized.parts), _NORMALIZED) if r["modality"] == modality
        )
        rows: list[dict[str, Any]] = []
        for row in iter_part_rows(store, list(shard.parts)):
            if row["modality"] != modality:
                continue
            data = next(media) if modality != "audio" else None
            if data is not None and data["doc_id"] != row["doc_id"]:
                raise RuntimeError(f"{batch}: {SHARD_STAGE} and {NORMALIZE_STAGE} disagree on sample order")
            rows.append(_view_row(modality, row, source, data))
            if len(rows) == ROWS_PER_WRITE:
                yield pa.RecordBatch.from_pylist(rows, schema=schema)
                rows = []
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)


def write_media_lance(
    store: ObjectStore,
    uris: dict[str, str],
    storage_options: dict[str, str] | None = None,
    *,
    namespace: str = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """Bring ``namespace``'s images, audio and videos datasets (only the batches whose effective namespace it is)
    in line with its ``media_shard`` outputs: only the batches whose output changed are (re)written
    (``lance_sync``); returns what each holds."""
    versions = stage_versions(store, SHARD_STAGE, namespace)
    batches = sorted(versions)
    inputs_version = stable_hash([VIEW_VERSION, [(batch, versions[batch]) for batch in batches]])
    result: dict[str, Any] = {"inputs_version": inputs_version}
    with store_lock(store, LANCE_LOCK):
        for modality, uri in sorted(uris.items()):
            view = LanceView(
                uri,
                storage_options,
                SCHEMAS[modality],
                VIEW_VERSION,
                lambda chosen, modality=modality: iter_view_batches(store, modality, chosen),
            )
            sync = sync_lance_batches(view, versions)
            result[modality] = {
                "version": sync.version,
                "rows": sync.rows,
                "written": sync.written,
                "batches_written": len(sync.batches_written),
            }
    return result
