"""Refs: the only mutable files. ``refs/<stage>/<batch>.json`` names a stage's current output folder.

Data under ``stages/`` is immutable and content-addressed; a ref is updated (atomically) each time a
stage materializes, like a git branch pointing at a commit. Downstream stages and reports follow refs.
"""

from __future__ import annotations

from fm_assets.engine import layout
from fm_assets.engine.records import PriorOutput, StageRef, StageSuccess
from fm_assets.engine.store import ObjectStore


class MissingUpstreamError(RuntimeError):
    """A stage ran before its upstream stage had output for that batch."""


def write_ref(
    store: ObjectStore, stage: str, batch: str, success: StageSuccess, *, cache_hit: bool, wall_seconds: float
) -> None:
    """Point the stage's ref at ``success``'s folder and record how the last materialization went."""
    ref = StageRef(success.prefix, success.data_version, cache_hit, round(wall_seconds, 4))
    store.write_json(layout.stage_ref(stage, batch), ref.to_json())


def read_ref(store: ObjectStore, stage: str, batch: str) -> StageRef | None:
    rel = layout.stage_ref(stage, batch)
    return StageRef.from_json(store.read_json(rel)) if store.exists(rel) else None


def read_success_at(store: ObjectStore, prefix: str) -> StageSuccess:
    return StageSuccess.from_json(store.read_json(layout.success_marker(prefix)))


def read_success(store: ObjectStore, stage: str, batch: str) -> StageSuccess:
    ref = read_ref(store, stage, batch)
    if ref is None:
        raise MissingUpstreamError(
            f"stage '{stage}' has no output for batch {batch} yet; materialize it first (fm run {batch})"
        )
    return read_success_at(store, ref.prefix)


def batches_with_ref(store: ObjectStore, stage: str) -> list[str]:
    return sorted(path.rsplit("/", 1)[-1].removesuffix(".json") for path in store.list(layout.refs_dir(stage)))


def earlier_outputs(store: ObjectStore, stage: str, batch: str) -> list[PriorOutput]:
    """The committed outputs of ``stage`` for every batch that sorts before ``batch`` (cross-batch indexes).

    Batches are ordered by id (landing order), so "earlier" is the same for serial and concurrent runs.
    """
    found = []
    for prior in batches_with_ref(store, stage):
        if prior >= batch:
            continue
        success = read_success(store, stage, prior)
        found.append(PriorOutput(prior, success.prefix, success.data_version, success.artifacts))
    return found
