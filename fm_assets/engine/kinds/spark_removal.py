"""Spark-backed removal stages: the partition's parts go to one Spark job that decides what is dropped."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fm_assets.engine.kinds.removal import RemovalDecision, RemovalStage
from fm_assets.engine.stage import StageContext, WorkUnit
from fm_assets.engine.store import ObjectStore


class SparkRemovalStage(RemovalStage):
    kind = "spark"

    def enabled(self, ctx: StageContext) -> bool:
        return True

    def removals(self, ctx: StageContext, local_parts: list[str], output_prefix: str) -> RemovalDecision:
        """The Spark job: every document it removes, with reason and details."""
        raise NotImplementedError

    def decide(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> RemovalDecision:
        parts = ctx.upstream_input.parts
        if not (self.enabled(ctx) and parts):
            return RemovalDecision()
        with local_parts(ctx.store, parts) as paths:
            return self.removals(ctx, [str(p) for p in paths], output_prefix)


@contextlib.contextmanager
def local_parts(store: ObjectStore, parts: tuple[str, ...]) -> Iterator[list[Path]]:
    """Local paths of the upstream parts (the files themselves on a local store, downloads on S3)."""
    if store.is_local:
        yield [store.local_path(p) for p in parts]
        return
    with store.staging_dir() as staging:
        paths = []
        for index, part in enumerate(parts):
            dest = staging / f"{index:05d}.parquet"
            store.fs.get(store.uri(part), str(dest))
            paths.append(dest)
        yield paths


def details_json(raw: str | None) -> dict[str, Any]:
    return json.loads(raw) if raw else {}
