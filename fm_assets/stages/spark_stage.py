"""Shared shape of the Spark-backed stages: a partition-wide Spark job decides which documents go.

``prepare`` runs the Spark job once over every upstream part (doc id -> reason, details); the work
units stay one per upstream part and stream it, writing kept records and rejecting the rest, so
accounting stays exact and part sizes (and so downstream memory) stay bounded.
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
    def enabled(self, ctx: StageContext) -> bool:
        return True

    def removals(self, ctx: StageContext, run: StageRun, local_parts: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """doc_id -> (reason, details) for every document the Spark job removes."""
        raise NotImplementedError

    def prepare(self, ctx: StageContext, run: StageRun, units: list[WorkUnit]) -> None:
        removed: dict[str, tuple[str, dict[str, Any]]] = {}
        assert ctx.upstream is not None
        if self.enabled(ctx) and ctx.upstream.parts:
            with local_parts(ctx, ctx.upstream.parts) as paths:
                removed = self.removals(ctx, run, [str(p) for p in paths])
        ctx.state["removed"] = removed

    def process(self, ctx: StageContext, run: StageRun, unit: WorkUnit, writer: UnitWriter) -> UnitResult:
        removed: dict[str, tuple[str, dict[str, Any]]] = ctx.state["removed"]
        records_in = rejected = 0
        for part in unit.inputs:
            for record in run.iter_rows(part):
                records_in += 1
                hit = removed.get(record["doc_id"])
                if hit is None:
                    writer.write(record)
                else:
                    reason, details = hit
                    rejected += 1
                    writer.reject(reject_row(record, batch=ctx.batch, stage=self.name, reason=reason, details=details))
        return UnitResult(records_in=records_in, extra={"removed": rejected})


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
