"""Deprecated: ``MediaLoader`` is :class:`fm_loader.Loader` with the argument order of earlier releases.

:class:`fm_loader.Loader` reads image-text and audio-text manifests itself (their builders are in
:mod:`fm_loader.builders.media`); this name stays so trainers written against it keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fm_loader.builders.media import STATE, BatchSpec
from fm_loader.loader import Loader
from fm_loader.media.buckets import DEFAULT_BUCKETS, BucketSet
from fm_loader.options import AccessOptions, MediaOptions, ReadOptions

__all__ = ["STATE", "BatchSpec", "MediaLoader"]


class MediaLoader(Loader):
    """Deprecated alias of :class:`fm_loader.Loader` for media manifests (keeps the old positional order)."""

    def __init__(
        self,
        source: Any,
        global_batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        epochs: int | None = 1,
        num_workers: int = 0,
        skip_corrupt: bool = False,
        allowed_namespaces: Sequence[str] = ("cloud",),
        allow_revoked: bool = False,
        buckets: BucketSet = DEFAULT_BUCKETS,
        max_caption_tokens: int | None = None,
        audio_max_frames: int | None = None,
        *,
        window_samples: int = 8192,
        prefetch: int = 2,
        cache_dir: str | None = None,
        cache_budget_bytes: int = 64 << 30,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(
            source,
            global_batch_size,
            rank,
            world_size,
            seed,
            num_workers,
            epochs=epochs,
            prefetch=prefetch,
            read=ReadOptions(skip_corrupt, cache_dir, cache_budget_bytes, storage_options),
            access=AccessOptions(tuple(allowed_namespaces), allow_revoked),
            media=MediaOptions(buckets, max_caption_tokens, audio_max_frames, window_samples),
        )
