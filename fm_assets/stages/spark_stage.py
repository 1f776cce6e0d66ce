"""Spark-backed removal stages: the partition's parts go to one Spark job that decides what is dropped."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fm_assets.stage import StageContext
from fm_assets.stage_runtime import StageRun, WorkUnit
from fm_assets.stages.removal_stage import Removals, RemovalStage


class SparkRemovalStage(RemovalStage):
    def enabled(self, ctx: StageContext) -> bool:
        return True

    def removals(self, ctx: StageContext, run: StageRun, local_parts: list[str]) -> Removals:
        """doc_id -> (reason, details) for every document the Spark job removes."""
        raise NotImplementedError

    def decide_removals(self, ctx: StageContext, run: StageRun, units: list[WorkUnit]) -> Removals:
        assert ctx.upstream is not None
        if not (self.enabled(ctx) and ctx.upstream.parts):
            return {}
        with local_parts(ctx, ctx.upstream.parts) as paths:
            return self.removals(ctx, run, [str(p) for p in paths])


@contextlib.contextmanager
def local_parts(ctx: StageContext, parts: tuple[str, ...]) -> Iterator[list[Path]]:
    """Local paths of the upstream parts (the files themselves on a local store, downloads on S3)."""
    if ctx.store.is_local:
        yield [ctx.store.local_path(p) for p in parts]
        return
    with ctx.store.staging_dir() as staging:
        paths = []
        for index, part in enumerate(parts):
            dest = staging / f"{index:05d}.parquet"
            ctx.store.fs.get(ctx.store.uri(part), str(dest))
            paths.append(dest)
        yield paths


def details_json(raw: str | None) -> dict[str, Any]:
    return json.loads(raw) if raw else {}
