"""The chains of preprocessing stages: the one place that fixes the graph's shape.

Each chain is linear and starts at the landing batch: ``text`` (documents -> packed token shards) and
``media`` (image-, audio- and video-text samples -> multimodal shards). Both run on the same partitions.
"""

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
    media_clip,
    media_dedup,
    media_filter,
    media_land,
    media_near_dedup,
    media_normalize,
    media_shard,
    media_validate,
    near_dedup,
    normalize,
    pack,
    pii_preflag,
    shard,
    tokenize,
    validate,
)
from fm_assets.stages.names import ALL_STAGE_NAMES, CHAIN_NAMES, MEDIA, TEXT

TEXT_STAGES: list[Stage] = [
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

MEDIA_STAGES: list[Stage] = [
    media_land.STAGE,
    media_validate.STAGE,
    media_clip.STAGE,
    media_filter.STAGE,
    media_dedup.STAGE,
    media_near_dedup.STAGE,
    media_normalize.STAGE,
    media_shard.STAGE,
]

CHAINS: dict[str, list[Stage]] = {TEXT: TEXT_STAGES, MEDIA: MEDIA_STAGES}
ALL_STAGES: list[Stage] = [stage for stages in CHAINS.values() for stage in stages]

__all__ = [
    "ALL_STAGES",
    "ALL_STAGE_NAMES",
    "CHAINS",
    "CHAIN_NAMES",
    "MEDIA",
    "MEDIA_STAGES",
    "TEXT",
    "TEXT_STAGES",
]


def chain_code_version(chain: str) -> str:
    """One identifier for the code of every stage of ``chain``."""
    return stable_hash([(stage.name, stage.code_version) for stage in CHAINS[chain]])


def chain_of(stage_name: str) -> str:
    for chain, names in CHAIN_NAMES.items():
        if stage_name in names:
            return chain
    raise KeyError(f"unknown stage {stage_name!r}; stages are {', '.join(ALL_STAGE_NAMES)}")


def check_chain() -> None:
    """Every chain matches its names list, starts at landing (no upstream) and reads only its predecessor."""
    if set(CHAINS) != set(CHAIN_NAMES):
        raise RuntimeError(f"chains {sorted(CHAINS)} do not match stages.names {sorted(CHAIN_NAMES)}")
    for chain, stages in CHAINS.items():
        if [stage.name for stage in stages] != CHAIN_NAMES[chain]:
            raise RuntimeError(f"stages.names {chain} chain {CHAIN_NAMES[chain]} does not match the registry")
        if stages[0].upstream is not None:
            raise RuntimeError(f"chain {chain} starts at {stages[0].name}, which reads {stages[0].upstream}")
        for before, after in pairwise(stages):
            if after.upstream != before.name:
                raise RuntimeError(f"stage {after.name} reads {after.upstream}, expected {before.name}")
    if len(set(ALL_STAGE_NAMES)) != len(ALL_STAGE_NAMES):
        raise RuntimeError(f"a stage name is used by two chains: {ALL_STAGE_NAMES}")
