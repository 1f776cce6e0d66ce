"""Stages that drop documents decided partition-wide (exact dedup, the Spark removals).

``prepare`` decides once which doc ids go (doc id -> reason, details); the work units stay one per
upstream part and stream it, writing kept records and rejecting the rest, so accounting stays exact
and part sizes (and so downstream memory) stay bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult, WorkUnit

Removals = dict[str, tuple[str, dict[str, Any]]]  # doc_id -> (reason, details)


@dataclass(frozen=True)
class RemovalDecision:
    """What ``prepare`` decided: the documents to drop, and anything ``complete`` writes as artifacts."""

    removed: Removals = field(default_factory=dict)
    artifacts: Mapping[str, Any] = field(default_factory=dict)


class RemovalStage(Stage):
    def decide(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> RemovalDecision:
        """Which documents of the partition this stage drops (and partition-level artifacts)."""
        raise NotImplementedError

    def prepare(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> RemovalDecision:
        return self.decide(ctx, units, output_prefix)

    def process(self, unit: UnitContext) -> UnitResult:
        decision: RemovalDecision = unit.prepared
        records_in = rejected = 0
        for part in unit.unit.inputs:
            for record in unit.iter_rows(part):
                records_in += 1
                hit = decision.removed.get(record["doc_id"])
                if hit is None:
                    unit.write(record)
                else:
                    reason, details = hit
                    rejected += 1
                    unit.reject(record, reason, details)
        return UnitResult(records_in=records_in, extra={"removed": rejected})
