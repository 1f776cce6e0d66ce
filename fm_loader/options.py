"""The loader's options, grouped by what they are about (reading, access, each sample kind's own, and
delivery: where batches are handed out).

:class:`fm_loader.loader.Loader` takes them as ``read=``, ``access=``, ``tokens=``, ``media=`` and ``delivery=``; the flat
keywords of earlier releases (``cache_dir=``, ``allow_revoked=``, ``extra_columns=``, ``buckets=`` ...) still
work and land in their group (:func:`group_options`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from fm_loader.access import DEFAULT_NAMESPACES
from fm_loader.media.buckets import DEFAULT_BUCKETS, BucketSet


@dataclass(frozen=True)
class ReadOptions:
    """How shards are fetched and read (every kind).

    Attributes:
        skip_corrupt: A row/sample that fails its checksum twice (or does not decode, or lies in a missing
            shard) becomes padding and is counted in the metrics, instead of raising.
        cache_dir: Folder for local copies of remote files; defaults to ``<tempdir>/fm_loader_cache``.
        cache_budget_bytes: Size bound of that folder; least recently used files are evicted first.
        storage_options: Passed to fsspec for remote manifests, mixtures and shards.
        prewarm_rows: Packed tokens: fetch the remote shards of the next ``prewarm_rows`` global rows ahead.
    """

    skip_corrupt: bool = False
    cache_dir: str | None = None
    cache_budget_bytes: int = 64 << 30
    storage_options: dict[str, Any] | None = None
    prewarm_rows: int = 0


@dataclass(frozen=True)
class AccessOptions:
    """Which releases this trainer may read.

    Attributes:
        allowed_namespaces: Namespaces this trainer may read; a source of another one raises ``NamespaceError``.
        allow_revoked: Read revoked releases anyway (a warning is logged) instead of ``RevokedDatasetError``.
    """

    allowed_namespaces: Collection[str] = DEFAULT_NAMESPACES
    allow_revoked: bool = False


@dataclass(frozen=True)
class TokenOptions:
    """Packed-token batches (see :class:`fm_loader.builders.tokens.PackedTokens`).

    Attributes:
        expected_vocab_size: If given, every source must have this vocabulary size.
        expected_seq_len: If given, the dataset's ``seq_len`` must equal it.
        max_docs_per_row: Width of ``cu_seqlens`` minus one (default: the sources' largest, else ``seq_len``).
        input_ids_dtype: ``torch.int32`` or ``torch.int64``.
        extra_columns: Per-token columns to add, name -> fill value (:mod:`fm_loader.columns`).
        held_out_rows: Rows of every source kept out of training (:mod:`fm_loader.holdout`).
        split: ``"train"`` or ``"validation:<source name>"``.
    """

    expected_vocab_size: int | None = None
    expected_seq_len: int | None = None
    max_docs_per_row: int | None = None
    input_ids_dtype: torch.dtype = torch.int32
    extra_columns: Mapping[str, int] | None = None
    held_out_rows: int = 0
    split: str = "train"


@dataclass(frozen=True)
class MediaOptions:
    """Image-text and audio-text batches (see :mod:`fm_loader.builders.media`).

    Attributes:
        buckets: Aspect-ratio buckets of image-text batches.
        max_caption_tokens: Width of ``caption_ids`` (default: the longest caption in the shape summaries).
        audio_max_frames: Pad (and cut) every audio batch to this many frames instead of the longest clip.
        window_samples: Samples per shuffle window (see :mod:`fm_loader.order`).
    """

    buckets: BucketSet = DEFAULT_BUCKETS
    max_caption_tokens: int | None = None
    audio_max_frames: int | None = None
    window_samples: int = 8192


IMAGE_DECODE_MODES = ("auto", "cpu", "gpu", "bytes")
JPEG_CODECS = ("auto", "nvimgcodec", "torchvision")  # see fm_loader.media.gpu_decode.choose_jpeg_codec


@dataclass(frozen=True)
class DeliveryOptions:
    """Where batches are handed out, and where images are decoded (see :mod:`fm_loader.device`).

    Attributes:
        device: ``None`` (default): host tensors, as before. ``"auto"``: the current CUDA device when there is
            one, else host tensors (one log line). ``"cuda:0"`` ...: that device (an error without CUDA). On a
            device, batches are staged in pinned host memory and copied on a side stream, ``device_prefetch``
            batches ahead.
        device_prefetch: Batches in flight to the device ahead of the one handed out (>= 1).
        image_decode: ``"auto"`` (default): image-text JPEGs are decoded on the GPU when batches go to a CUDA
            device and a GPU JPEG codec works there (``jpeg_codec``), else on the CPU; ``"cpu"``: always on
            the CPU; ``"gpu"``: on the GPU, an error when that is not possible (see
            :mod:`fm_loader.media.gpu_decode`); ``"bytes"``: not decoded, batches carry the checksummed
            compressed bytes (``image_bytes``, ``image_offsets``, ``image_where``) instead of ``images`` (what
            the workers of a GPU-decoding loader hand over).
        jpeg_codec: The GPU JPEG codec: ``"auto"`` (default): torchvision's nvJPEG decode, else NVIDIA
            nvImageCodec when only it is installed; ``"torchvision"`` or ``"nvimgcodec"`` (the GPU's hardware
            JPEG engines on an A100/H100/H200; measured slower on an H200, see docs/gpu.md): that one only.
        handover: How worker processes hand batches to this process: ``"shm"`` (default: a reused ring of
            shared-memory slots per worker) or ``"pickle"`` (torch's own queue, a fresh shared segment per
            tensor; kept for comparison).
        worker_nice: How much lower than the trainer's the worker processes' CPU priority is (Unix nice
            increment, 0-19; default 0: the same). A trainer's thread launches the GPU's kernels and spins while
            it waits for them; when decode workers take its CPU the step slows, which no wait-time metric sees.
            Lowered workers get what the trainer leaves: better where the workers have CPU to spare, worse
            where they are the bottleneck (``bench/workers.py --trainer-cpu-ms``; docs/gpu.md).
    """

    device: str | torch.device | None = None
    device_prefetch: int = 2
    image_decode: str = "auto"
    jpeg_codec: str = "auto"
    handover: str = "shm"
    worker_nice: int = 0

    def __post_init__(self) -> None:
        if self.device_prefetch < 1:
            raise ValueError(f"device_prefetch must be >= 1, got {self.device_prefetch}")
        if self.image_decode not in IMAGE_DECODE_MODES:
            raise ValueError(f"image_decode must be one of {IMAGE_DECODE_MODES}, got {self.image_decode!r}")
        if self.jpeg_codec not in JPEG_CODECS:
            raise ValueError(f"jpeg_codec must be one of {JPEG_CODECS}, got {self.jpeg_codec!r}")
        if self.handover not in ("shm", "pickle"):
            raise ValueError(f"handover must be 'shm' or 'pickle', got {self.handover!r}")
        if not 0 <= self.worker_nice <= 19:
            raise ValueError(f"worker_nice must be between 0 and 19, got {self.worker_nice}")


@dataclass(frozen=True)
class LoaderOptions:
    """Every option group of one loader (what a worker process rebuilds its loader from)."""

    read: ReadOptions = ReadOptions()
    access: AccessOptions = AccessOptions()
    tokens: TokenOptions = TokenOptions()
    media: MediaOptions = MediaOptions()
    delivery: DeliveryOptions = DeliveryOptions()


_GROUPS: dict[str, type] = {
    "read": ReadOptions,
    "access": AccessOptions,
    "tokens": TokenOptions,
    "media": MediaOptions,
    "delivery": DeliveryOptions,
}
_FLAT = {f.name: group for group, kind in _GROUPS.items() for f in fields(kind)}


def group_options(groups: dict[str, Any], flat: dict[str, Any]) -> LoaderOptions:
    """The option groups given (``None`` for defaults) with the flat keywords of earlier releases applied.

    Raises:
        TypeError: A flat keyword that no group has.
    """
    unknown = sorted(set(flat) - set(_FLAT))
    if unknown:
        raise TypeError(f"Loader() got unexpected keyword argument(s) {unknown}")
    defaults = LoaderOptions()
    chosen = {name: groups.get(name) or getattr(defaults, name) for name in _GROUPS}
    for name in _GROUPS:
        mine = {key: value for key, value in flat.items() if _FLAT[key] == name}
        if mine:
            chosen[name] = replace(chosen[name], **mine)
    return LoaderOptions(**chosen)
