"""Refs: the only mutable files. ``refs/<stage>/<batch>.json`` names a stage's current output folder.

Data under ``stages/`` is immutable and content-addressed; a ref is updated (atomically) each time a
stage materializes, like a git branch pointing at a commit. Downstream stages and reports follow refs.
"""

from __future__ import annotations

from typing import Any

from fm_resources.object_store import ObjectStore


class MissingUpstreamError(RuntimeError):
    """A stage ran before its upstream stage had output for that batch."""


def ref_rel(stage: str, batch: str) -> str:
    return f"refs/{stage}/{batch}.json"


def write_ref(
    store: ObjectStore, stage: str, batch: str, success: dict[str, Any], *, cache_hit: bool, wall_seconds: float
) -> None:
    """Point the stage's ref at ``success``'s folder and record how the last materialization went."""
    store.write_json(
        ref_rel(stage, batch),
        {
            "prefix": success["prefix"],
            "data_version": success["data_version"],
            "last_cache_hit": cache_hit,
            "last_wall_seconds": round(wall_seconds, 4),
        },
    )


def read_ref(store: ObjectStore, stage: str, batch: str) -> dict[str, Any] | None:
    rel = ref_rel(stage, batch)
    return store.read_json(rel) if store.exists(rel) else None


def read_success(store: ObjectStore, stage: str, batch: str) -> dict[str, Any]:
    ref = read_ref(store, stage, batch)
    if ref is None:
        raise MissingUpstreamError(
            f"stage '{stage}' has no output for batch {batch} yet; materialize it first (fm run {batch})"
        )
    return store.read_json(f"{ref['prefix']}/_SUCCESS.json")


def batches_with_ref(store: ObjectStore, stage: str) -> list[str]:
    return sorted(path.rsplit("/", 1)[-1].removesuffix(".json") for path in store.list(f"refs/{stage}"))
