"""The media sample record every media stage reads and writes, and the names that say what is media.

One schema for the whole media chain (as ``DOC_SCHEMA`` is for text): ``media_land`` fills the provenance
and the raw media pointer, ``media_validate`` the decoded shape and perceptual hashes, ``media_normalize``
the normalized bytes. The sample id column is called ``doc_id`` like text's, so rejects tables and the
removal stages treat documents and samples alike.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pyarrow as pa

IMAGE = "image"
AUDIO = "audio"
VIDEO = "video"

IMAGE_EXTENSIONS = frozenset({"jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff"})
AUDIO_EXTENSIONS = frozenset({"wav", "flac", "mp3", "ogg", "opus"})
VIDEO_EXTENSIONS = frozenset({"mp4", "webm", "ogv", "mkv", "mov"})
TEXT_EXTENSIONS = ("txt", "json")  # a sample's caption or transcript, in this order of preference
TAR_EXTENSION = "tar"
MEDIA_JSONL_SUFFIX = ".media.jsonl"  # JSON lines naming media files by path, each with its text

MEDIA_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),  # sample id: f"{container sha256[:16]}:{index}"
        pa.field("batch", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("license", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("cas_hash", pa.string(), nullable=False),  # sha256 of the landed file holding the media
        pa.field("record_index", pa.int64(), nullable=False),  # sample number inside that file
        pa.field("origin", pa.string(), nullable=False),  # landed path (+ "#key" inside a tar or JSONL)
        pa.field("key", pa.string(), nullable=False),  # the sample key (WebDataset __key__)
        pa.field("modality", pa.string(), nullable=False),  # image | audio | video
        pa.field("media_sha256", pa.string(), nullable=False),  # raw media bytes, in cas/
        pa.field("media_ext", pa.string(), nullable=False),
        pa.field("media_bytes", pa.int64(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),  # caption or transcript
        # filled by media_validate (decoded shape) and replaced by media_normalize (normalized shape)
        pa.field("media_format", pa.string()),
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("sample_rate", pa.int32()),
        pa.field("channels", pa.int32()),
        pa.field("duration_s", pa.float64()),
        pa.field("phash", pa.uint64()),  # images: 64-bit perceptual hashes
        pa.field("dhash", pa.uint64()),
        pa.field("metrics", pa.string()),  # JSON: what media_filter measured (entropy, silence, SNR, ...)
        # filled by media_normalize
        pa.field("norm_sha256", pa.string()),  # of norm_data
        pa.field("norm_ext", pa.string()),
        pa.field("norm_bytes", pa.int64()),
        pa.field("norm_data", pa.large_binary()),  # the normalized media as it goes into the shard
        # video: filled by media_validate (the whole file) and media_clip (one record per clip)
        pa.field("fps", pa.float64()),
        pa.field("frame_count", pa.int64()),
        pa.field("has_audio", pa.bool_()),
        pa.field("clip_index", pa.int32()),
        pa.field("clip_start_s", pa.float64()),
        pa.field("clip_end_s", pa.float64()),
        pa.field("keyframes", pa.int32()),  # keyframes in the clip's strip (norm_data)
        pa.field("keyframe_phashes", pa.list_(pa.uint64())),
        # video, only when ClipPolicy.store_clip: the clip re-encoded (media_clip)
        pa.field("clip_sha256", pa.string()),
        pa.field("clip_ext", pa.string()),
        pa.field("clip_bytes", pa.int64()),
        pa.field("clip_data", pa.large_binary()),
    ]
)


def extension(path: str) -> str:
    """The last suffix of ``path``, lower case, without the dot ("" when there is none)."""
    return PurePosixPath(path).suffix.lower().removeprefix(".")


def modality_of(ext: str) -> str | None:
    ext = ext.lower()
    if ext in IMAGE_EXTENSIONS:
        return IMAGE
    if ext in AUDIO_EXTENSIONS:
        return AUDIO
    if ext in VIDEO_EXTENSIONS:
        return VIDEO
    return None
