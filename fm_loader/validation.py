"""``validation_loaders``: one loader per source over its fixed held-out slice, for per-dataset validation loss.

Each slice is chosen from the source's content alone (:mod:`fm_loader.holdout`), so it is the same in every
run, under any seed and world size; the training loader built with the same ``held_out_rows`` never reads it.
Remote shards of a slice are downloaded into the loader cache on the first pass and read from there after
(the training loader never touches them, so it never evicts them).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from fm_loader.access import DEFAULT_NAMESPACES, check_access
from fm_loader.holdout import VALIDATION_PREFIX
from fm_loader.loader import Loader
from fm_loader.mixture import load_mixture
from fm_loader.storage import ShardCache

VALIDATION_SEED = 0
"""Validation slices are read in one fixed order whatever the training seed."""


def validation_loaders(
    source: Any,
    rows_per_dataset: int,
    global_batch_size: int,
    rank: int = 0,
    world_size: int = 1,
    *,
    allowed_namespaces: Collection[str] = DEFAULT_NAMESPACES,
    allow_revoked: bool = False,
    cache_dir: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **loader_options: Any,
) -> dict[str, Loader]:
    """One :class:`~fm_loader.loader.Loader` per source over its held-out ``rows_per_dataset`` rows.

    Args:
        source: What the training loader reads (manifest, mixture YAML or dict, :class:`DatasetManifest`).
        rows_per_dataset: Rows held out of every source; the training loader must get
            ``held_out_rows=rows_per_dataset`` so that it skips them.
        global_batch_size: Rows per global validation batch (the last one is padded: ``loss_mask`` is False
            on padding, so a masked mean loss is exact).
        rank: This process's rank.
        world_size: Number of ranks.
        allowed_namespaces: As for :class:`Loader`.
        allow_revoked: As for :class:`Loader`.
        cache_dir: As for :class:`Loader`.
        storage_options: As for :class:`Loader`.
        **loader_options: Any other :class:`Loader` keyword (``expected_tokenizer_hash``, ``extra_columns``,
            ``num_workers``, ...); ``seed`` and ``epochs`` are fixed (0 and 1).

    Returns:
        Source name -> loader of one epoch over that source's slice.

    Raises:
        ValueError: A source is too small to hold ``rows_per_dataset`` out, or two sources share a name.
        NamespaceError: A source's namespace is not allowed.
        RevokedDatasetError: A source is revoked and ``allow_revoked`` is False.
    """
    for fixed in ("seed", "epochs", "split", "held_out_rows"):
        if fixed in loader_options:
            raise ValueError(f"validation_loaders fixes {fixed!r}; leave it out")
    cache = ShardCache(cache_dir, storage_options=storage_options)
    mixture = load_mixture(source, cache, allowed_namespaces=allowed_namespaces)
    check_access(mixture.sources, allowed_namespaces, allow_revoked)
    names = [src.name for src in mixture.sources]
    return {
        name: Loader(
            source,
            global_batch_size,
            rank,
            world_size,
            seed=VALIDATION_SEED,
            epochs=1,
            allowed_namespaces=allowed_namespaces,
            allow_revoked=allow_revoked,
            cache_dir=cache_dir,
            storage_options=storage_options,
            held_out_rows=rows_per_dataset,
            split=f"{VALIDATION_PREFIX}{name}",
            **loader_options,
        )
        for name in names
    }
