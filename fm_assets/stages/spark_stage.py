"""Shared shape of the Spark-backed stages: one partition-wide unit that removes a set of documents.

The Spark job decides which doc ids go (with reason and details); the unit then streams the upstream
parts once, writing kept records and rejecting the rest, so accounting stays exact.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fm_assets.stage import Stage, StageContext
from fm_assets.stage_runtime import StageRun, UnitResult, UnitWriter, WorkUnit
from fm_assets.steps.records import reject_row


class SparkRemovalStage(Stage):
    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        assert ctx.upstream is not None
        return [WorkUnit("all", ctx.upstream.parts)]

    def enabled(self, ctx: StageContext) -> bool:
        return True

    def removals(self, ctx: StageContext, run: StageRun, local_parts: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """doc_id -> (reason, details) for every document the Spark job removes."""
        raise NotImplementedError

    def process(self, ctx: StageContext, run: StageRun, unit: WorkUnit, writer: UnitWriter) -> UnitResult:
        removed: dict[str, tuple[str, dict[str, Any]]] = {}
        if self.enabled(ctx) and unit.inputs:
            with local_parts(ctx, unit.inputs) as paths:
                removed = self.removals(ctx, run, [str(p) for p in paths])
        records_in = 0
        for part in unit.inputs:
            for record in run.iter_rows(part):
                records_in += 1
                hit = removed.get(record["doc_id"])
                if hit is None:
                    writer.write(record)
                else:
                    reason, details = hit
                    writer.reject(reject_row(record, batch=ctx.batch, stage=self.name, reason=reason, details=details))
        return UnitResult(records_in=records_in, extra={"removed": len(removed)})


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
