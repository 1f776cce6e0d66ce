"""The media shard format: WebDataset ``.tar`` files of image-, audio- or video-text samples plus a sample index.

A shard ``<name>.tar`` holds, for each sample (key ``<name>/<sample key>``: unique across shards, which
Energon requires, and traceable to the shard), three members in this order:

* ``<key>.<jpg|png|flac|wav|strip.jpg>`` - the media bytes as given (``strip.jpg``: a video clip's F
  keyframes stacked vertically in one JPEG; its ``.json`` says ``keyframes``, the index's ``frames``);
* ``<key>.txt``  - the caption or transcript, UTF-8;
* ``<key>.json`` - the sample's metadata (provenance, licence, optional ``caption_tokens``) with the shape
  fields measured from the media headers: ``width``/``height`` for images (and for one keyframe of a video
  clip, with ``keyframes``), ``sample_rate``/``frames``/``channels``/``duration_s`` for audio. Sorted keys, no whitespace.

A video-text sample may carry a fourth member last, ``<key>.clip.mp4``: the clip itself, re-encoded (when the
pipeline's clip policy stores clips). It is inside the sample's byte range and checksum; the index does not
locate it (its record layout is unchanged): a reader finds it from the tar header after the ``.json`` member
(:func:`trailing_clip`). Readers that know three members skip it; the manifest's shape summary counts clips.

Tar headers are written exactly as the text format writes them (:mod:`fm_loader.format`: ustar, mtime 0,
uid/gid 0, no owner names), so identical samples give identical bytes and ``webdataset`` reads the tar as it is.

``<name>.idx`` is the sample index: a fixed header, one fixed-size record per sample (byte range of the whole
sample and of each member's payload, the low 32 bits of the xxh3-64 of the sample's bytes - all three members
with their tar headers and padding, as the text format's sample checksum -, the media kind and the shape:
width, height, sample rate, channels, frames, caption token count), the sample keys, and an xxh3-64 footer over
everything before it. The loader plans its aspect-ratio buckets from the index alone, without opening a tar.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fm_loader.media.buckets import DEFAULT_BUCKETS
from fm_loader.media.clip_member import CLIP_EXT, trailing_clip
from fm_loader.media.index import (
    MEDIA_FORMAT_VERSION,
    MEDIA_INDEX_DTYPE,
    MEDIA_INDEX_MAGIC,
    CorruptMediaIndexError,
    MediaIndex,
    decode_media_index,
    encode_media_index,
)
from fm_loader.tarwriter import SampleTar

# the sample index lives in fm_loader.media.index; this is the media codec's public face
__all__ = [
    "AUDIO_EXTS",
    "CLIP_EXT",
    "IMAGE_EXTS",
    "KEY_PATTERN",
    "MEDIA_EXTS",
    "MEDIA_FORMAT_VERSION",
    "MEDIA_INDEX_DTYPE",
    "MEDIA_INDEX_MAGIC",
    "MEDIA_KIND",
    "REQUIRED_META",
    "SHAPE_FIELDS",
    "VIDEO_EXTS",
    "CorruptMediaIndexError",
    "EncodedMediaShard",
    "MediaIndex",
    "MediaSample",
    "MediaShape",
    "MediaShardInfo",
    "decode_media_index",
    "encode_media_index",
    "encode_media_shard",
    "media_schema_fingerprint",
    "modality_of",
    "probe_shape",
    "sample_json",
    "shape_summary",
    "trailing_clip",
]

IMAGE_EXTS = ("jpg", "png")
AUDIO_EXTS = ("flac", "wav")
VIDEO_EXTS = ("strip.jpg",)  # a clip's F keyframes stacked vertically in one JPEG
MEDIA_EXTS = IMAGE_EXTS + AUDIO_EXTS + VIDEO_EXTS
MEDIA_KIND = {ext: code for code, ext in enumerate(MEDIA_EXTS)}  # the index's media_kind byte
_PIL_FORMATS = {"jpg": "JPEG", "png": "PNG"}
SHAPE_FIELDS = {
    "image": ("width", "height"),
    "audio": ("sample_rate", "frames", "channels", "duration_s"),
    "video": ("width", "height", "keyframes"),
}
REQUIRED_META = ("licence", "provenance")
KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")


def modality_of(ext: str) -> str:
    """``"image"`` for jpg/png, ``"audio"`` for flac/wav, ``"video"`` for a keyframe strip."""
    if ext in VIDEO_EXTS:
        return "video"
    return "image" if ext in IMAGE_EXTS else "audio"


def media_schema_fingerprint(format_version: int = MEDIA_FORMAT_VERSION) -> str:
    """Identifies the sample layout (members, index record layout, checksum) of a media format version."""
    desc = {
        "format_version": format_version,
        "members": ["media", "txt", "json"],
        "index": [list(f) for f in MEDIA_INDEX_DTYPE.descr],
        "checksum": "xxh3_64_low32",
    }
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class MediaSample:
    """One image-text or audio-text sample as the shard stage hands it to :func:`encode_media_shard`.

    Attributes:
        key: The sample's id inside the shard: 1 to 128 of ``A-Z a-z 0-9 _ -`` (no dots: WebDataset splits
            member names at the first dot).
        media: The encoded image or audio bytes, stored as they are.
        media_ext: ``"jpg"``, ``"png"``, ``"flac"`` or ``"wav"``; must match what the bytes are.
        text: Caption (images) or transcript (audio).
        meta: JSON-serialisable metadata; must hold ``licence`` and ``provenance``; may hold ``caption_tokens``
            (a list of token ids in ``[0, 65536)``). Shape fields (``width``/``height``, ``sample_rate``/
            ``frames``/``channels``/``duration_s``) are measured from the media; given ones must agree.
        clip: Video-text only, optional: the clip re-encoded (MP4), stored as ``<key>.clip.mp4``.
    """

    key: str
    media: bytes
    media_ext: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)
    clip: bytes | None = None


@dataclass(frozen=True)
class MediaShape:
    """What the writer measures from the media headers (no full decode)."""

    width: int = 0
    height: int = 0
    sample_rate: int = 0
    channels: int = 0
    frames: int = 0

    def as_meta(self, modality: str) -> dict[str, Any]:
        if modality == "image":
            return {"width": self.width, "height": self.height}
        if modality == "video":  # width/height of one keyframe
            return {"width": self.width, "height": self.height, "keyframes": self.frames}
        duration = round(self.frames / self.sample_rate, 6)
        return {
            "sample_rate": self.sample_rate,
            "frames": self.frames,
            "channels": self.channels,
            "duration_s": duration,
        }


def probe_shape(media: bytes, ext: str, where: str, keyframes: int = 0) -> MediaShape:
    """Measure an image's size or an audio clip's rate, channels and frames from its headers.

    Args:
        media: The encoded bytes.
        ext: Their declared extension.
        where: Names the sample in error messages.

    Raises:
        ValueError: The bytes are not a readable ``ext`` file.
        ImportError: Pillow (images) or soundfile (audio) is not installed.
    """
    if ext in VIDEO_EXTS:
        strip = probe_shape(media, "jpg", where)
        if keyframes < 1 or strip.height % keyframes:
            raise ValueError(
                f"{where}: a {strip.width}x{strip.height} keyframe strip does not hold meta['keyframes']="
                f"{keyframes!r} frames of equal height"
            )
        return MediaShape(width=strip.width, height=strip.height // keyframes, frames=keyframes)
    if ext in IMAGE_EXTS:
        try:
            from PIL import Image
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("image shards need Pillow: pip install 'fm-data-platform[media]'") from exc
        try:
            with Image.open(io.BytesIO(media)) as image:
                fmt, (width, height) = image.format, image.size
        except Exception as exc:
            raise ValueError(f"{where}: media is not a readable {ext} image ({exc})") from exc
        if fmt != _PIL_FORMATS[ext]:
            raise ValueError(f"{where}: media_ext is {ext!r} but the bytes are {fmt}; fix media_ext")
        return MediaShape(width=width, height=height)
    try:
        import soundfile
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("audio shards need soundfile: pip install 'fm-data-platform[media]'") from exc
    try:
        info = soundfile.info(io.BytesIO(media))
    except Exception as exc:
        raise ValueError(f"{where}: media is not a readable {ext} file ({exc})") from exc
    if info.format.lower() != ext:
        raise ValueError(f"{where}: media_ext is {ext!r} but the bytes are {info.format}; fix media_ext")
    return MediaShape(sample_rate=info.samplerate, channels=info.channels, frames=info.frames)


def _check_caption_tokens(tokens: Any, where: str) -> int:
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 65536 for t in tokens
    ):
        raise ValueError(f"{where}: meta['caption_tokens'] must be a list of token ids in [0, 65536)")
    if len(tokens) >= 65536:
        raise ValueError(f"{where}: {len(tokens)} caption tokens; at most 65535 are stored")
    return len(tokens)


def sample_json(sample: MediaSample, shape: MediaShape, where: str) -> bytes:
    """The ``.json`` member: the caller's meta with the measured shape fields (given ones must agree).

    Raises:
        ValueError: Meta is not a JSON object with ``licence`` and ``provenance``, is not JSON-serialisable
            (NaN included), or states a shape that differs from the media.
    """
    meta = sample.meta
    if not isinstance(meta, Mapping) or not all(isinstance(k, str) for k in meta):
        raise ValueError(f"{where}: meta must be a dict with string keys, got {type(meta).__name__}")
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        raise ValueError(f"{where}: meta has no {missing}; every sample records its licence and provenance")
    modality = modality_of(sample.media_ext)
    measured = shape.as_meta(modality)
    for name, value in measured.items():
        given = meta.get(name)
        if given is None:
            continue
        same = math.isclose(given, value, abs_tol=1e-3) if name == "duration_s" else given == value
        if not same:
            raise ValueError(f"{where}: meta says {name}={given!r} but the media has {value!r}")
    foreign = {f for kind, names in SHAPE_FIELDS.items() if kind != modality for f in names}
    other = [name for name in sorted(foreign - set(SHAPE_FIELDS[modality])) if name in meta]
    if other:
        raise ValueError(f"{where}: an {modality} sample's meta has {other}; drop them")
    if "caption_tokens" in meta:
        _check_caption_tokens(meta["caption_tokens"], where)
    try:
        return json.dumps(
            {**meta, **measured}, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False
        ).encode()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: meta is not JSON-serialisable ({exc})") from exc


@dataclass(frozen=True)
class MediaShardInfo:
    """What the pipeline records about one encoded media shard (see :meth:`MediaShardEntry.from_info`).

    Attributes:
        name: Shard name given to :func:`encode_media_shard`.
        tar_name: File name of the tar (``<name>.tar``).
        index_name: File name of the sample index (``<name>.idx``).
        sha256: SHA-256 of the tar bytes (hex).
        index_sha256: SHA-256 of the index bytes (hex).
        samples: Number of samples.
        bytes: Size of the tar in bytes.
        modality: ``"image-text"`` or ``"audio-text"``.
        shape_summary: Images: ``width``/``height`` ``[min, max]`` and the default-bucket histogram
            (``buckets``: the shapes, ``bucket_counts``); audio: ``sample_rates``, ``channels``, ``frames``
            and ``duration_s`` ``[min, max]``. Plus ``caption_tokens_max``.
    """

    name: str
    tar_name: str
    index_name: str
    sha256: str
    index_sha256: str
    samples: int
    bytes: int
    modality: str
    shape_summary: dict[str, Any]


@dataclass(frozen=True)
class EncodedMediaShard:
    """The files of one encoded media shard and its summary.

    Attributes:
        files: File name -> bytes: ``<name>.tar`` and ``<name>.idx``, to be written side by side.
        info: What to record in the manifest.
    """

    files: dict[str, bytes]
    info: MediaShardInfo


def _check_sample(sample: MediaSample, shard_name: str, position: int, seen: dict[str, int]) -> str:
    where = f"shard {shard_name!r} sample {position}"
    if not isinstance(sample.key, str) or not KEY_PATTERN.fullmatch(sample.key):
        raise ValueError(
            f"{where}: key {sample.key!r} must be 1-128 characters of A-Z a-z 0-9 _ - (no dots or slashes)"
        )
    where = f"shard {shard_name!r} sample {position} ({sample.key})"
    if sample.key in seen:
        raise ValueError(
            f"{where}: key collides with sample {seen[sample.key]}; keys must be unique in a shard"
        )
    seen[sample.key] = position
    if sample.media_ext not in MEDIA_EXTS:
        raise ValueError(f"{where}: unknown media_ext {sample.media_ext!r}; use one of {MEDIA_EXTS}")
    if not isinstance(sample.media, (bytes, bytearray, memoryview)) or not len(sample.media):
        raise ValueError(f"{where}: media must be non-empty bytes")
    if not isinstance(sample.text, str):
        raise ValueError(f"{where}: text must be a str, got {type(sample.text).__name__}")
    if sample.clip is not None:
        if sample.media_ext not in VIDEO_EXTS:
            raise ValueError(
                f"{where}: only a video-text sample carries a clip; drop it or use a keyframe strip"
            )
        if not isinstance(sample.clip, (bytes, bytearray)) or not sample.clip:
            raise ValueError(f"{where}: clip must be non-empty bytes (or None)")
    return where


def encode_media_shard(samples: Iterable[MediaSample], shard_name: str) -> EncodedMediaShard:
    """Encode samples into the bytes of ``<shard_name>.tar`` and ``<shard_name>.idx``.

    Identical input gives identical bytes. A shard holds one modality (images or audio, any of its
    extensions).

    Args:
        samples: The samples, in shard order.
        shard_name: Name of the shard; also the prefix of every member name (``<shard_name>/<key>.<ext>``).

    Returns:
        The two files' bytes (nothing is written to disk) and the shard's :class:`MediaShardInfo`.

    Raises:
        ValueError: An invalid key, a duplicate key, an unknown extension, media that is not what its
            extension says, meta that is not JSON or lacks licence/provenance, text that is not UTF-8, images
            and audio in one shard, or no samples. The message names the shard, the sample and what to fix.
    """
    if not shard_name or shard_name.startswith("/") or ".." in shard_name.split("/"):
        raise ValueError(f"shard name {shard_name!r} must be a non-empty relative name")
    tar = SampleTar()
    records: list[tuple[Any, ...]] = []
    keys: list[bytes] = []
    seen: dict[str, int] = {}
    modality = ""
    shapes: list[MediaShape] = []
    clips = 0
    for position, sample in enumerate(samples):
        where = _check_sample(sample, shard_name, position, seen)
        kind = modality_of(sample.media_ext)
        if modality and kind != modality:
            raise ValueError(
                f"{where}: {kind} sample in a shard of {modality} samples; one modality per shard"
            )
        modality = kind
        try:
            text = sample.text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{where}: text is not valid UTF-8 ({exc})") from exc
        media = bytes(sample.media)
        keyframes = sample.meta.get("keyframes", 0) if isinstance(sample.meta, Mapping) else 0
        shape = probe_shape(media, sample.media_ext, where, keyframes if isinstance(keyframes, int) else 0)
        meta = sample_json(sample, shape, where)
        n_caption_tokens = len(sample.meta.get("caption_tokens", ()))
        base = f"{shard_name}/{sample.key}"
        start = tar.tell()
        media_offset = tar.add_member(f"{base}.{sample.media_ext}", media)
        text_offset = tar.add_member(f"{base}.txt", text)
        meta_offset = tar.add_member(f"{base}.json", meta)
        if sample.clip is not None:
            tar.add_member(f"{base}.{CLIP_EXT}", bytes(sample.clip))
            clips += 1
        checksum, size = tar.end_sample()
        records.append(
            (
                start,
                size,
                media_offset,
                len(media),
                text_offset,
                meta_offset,
                shape.frames,
                len(text),
                len(meta),
                checksum,
                shape.width,
                shape.height,
                shape.sample_rate,
                shape.channels,
                n_caption_tokens,
                MEDIA_KIND[sample.media_ext],
                b"",
            )
        )
        keys.append(sample.key.encode())
        shapes.append(shape)
    if not records:
        raise ValueError(f"shard {shard_name!r}: no samples to encode")
    tar_bytes = tar.finish()
    index = np.array(records, dtype=MEDIA_INDEX_DTYPE)
    index_bytes = encode_media_index(index, keys)
    tar_name, index_name = f"{shard_name}.tar", f"{shard_name}.idx"
    info = MediaShardInfo(
        name=shard_name,
        tar_name=tar_name,
        index_name=index_name,
        sha256=hashlib.sha256(tar_bytes).hexdigest(),
        index_sha256=hashlib.sha256(index_bytes).hexdigest(),
        samples=len(records),
        bytes=len(tar_bytes),
        modality=f"{modality}-text",
        shape_summary={**shape_summary(index), **({"clips": clips} if clips else {})},
    )
    return EncodedMediaShard(files={tar_name: tar_bytes, index_name: index_bytes}, info=info)


def shape_summary(records: np.ndarray) -> dict[str, Any]:
    """The per-shard shape summary the manifest carries (see :attr:`MediaShardInfo.shape_summary`)."""
    summary: dict[str, Any] = {"caption_tokens_max": int(records["caption_tokens"].max(initial=0))}
    if len(records) and int(records["media_kind"][0]) == MEDIA_KIND[VIDEO_EXTS[0]]:
        summary["keyframes"] = sorted({int(f) for f in records["frames"]})
    if int(records["width"].max(initial=0)) > 0:
        widths, heights = records["width"], records["height"]
        summary.update(
            width=[int(widths.min()), int(widths.max())],
            height=[int(heights.min()), int(heights.max())],
            buckets=[list(s) for s in DEFAULT_BUCKETS.shapes],
            bucket_counts=DEFAULT_BUCKETS.histogram(widths, heights),
        )
    else:
        frames, rates = records["frames"], records["sample_rate"]
        durations = frames / np.maximum(rates, 1)
        summary.update(
            sample_rates=sorted({int(r) for r in rates}),
            channels=sorted({int(c) for c in records["channels"]}),
            frames=[int(frames.min()), int(frames.max())],
            duration_s=[round(float(durations.min()), 6), round(float(durations.max()), 6)],
        )
    return summary
