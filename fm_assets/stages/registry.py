"""The ordered list of preprocessing stages: the one place that fixes the graph's shape."""

from __future__ import annotations

from itertools import pairwise

from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.stage import Stage
from fm_assets.stages import (
    blocklist,
    decontaminate,
    dedup,
    filter,
    land,
    near_dedup,
    normalize,
    pack,
    pii_preflag,
    shard,
    tokenize,
    validate,
)
from fm_assets.stages.names import STAGE_NAMES

STAGES: list[Stage] = [
    land.STAGE,
    validate.STAGE,
    pii_preflag.STAGE,
    filter.STAGE,
    dedup.STAGE,
    blocklist.STAGE,
    near_dedup.STAGE,
    normalize.STAGE,
    decontaminate.STAGE,
    tokenize.STAGE,
    pack.STAGE,
    shard.STAGE,
]


def pipeline_code_version() -> str:
    """One identifier for the code of every stage (recorded in shard manifests)."""
    return stable_hash([(stage.name, stage.code_version) for stage in STAGES])


def check_chain() -> None:
    if [stage.name for stage in STAGES] != STAGE_NAMES:
        raise RuntimeError(f"stages.names.STAGE_NAMES {STAGE_NAMES} does not match the registry")
    for before, after in pairwise(STAGES):
        if after.upstream != before.name:
            raise RuntimeError(f"stage {after.name} reads {after.upstream}, expected {before.name}")
