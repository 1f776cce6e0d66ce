"""The ordered list of preprocessing stages: the one place that fixes the graph's shape."""

from __future__ import annotations

from itertools import pairwise

from fm_assets.stage import Stage
from fm_assets.stage_runtime import stable_hash
from fm_assets.stages import (
    blocklist,
    decontaminate,
    dedup,
    filter,
    land,
    near_dedup,
    normalize,
    pack,
    pii,
    shard,
    tokenize,
    validate,
)

STAGES: list[Stage] = [
    land.STAGE,
    validate.STAGE,
    pii.STAGE,
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
STAGE_NAMES = [stage.name for stage in STAGES]


def pipeline_code_version() -> str:
    """One identifier for the code of every stage (recorded in shard manifests)."""
    return stable_hash([(stage.name, stage.code_version) for stage in STAGES])


def check_chain() -> None:
    for before, after in pairwise(STAGES):
        if after.upstream != before.name:
            raise RuntimeError(f"stage {after.name} reads {after.upstream}, expected {before.name}")
