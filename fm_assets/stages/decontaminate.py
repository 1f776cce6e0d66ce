"""decontaminate: drop documents that share word n-grams with the evaluation sets (mandatory before shards)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from fm_assets.stage import StageContext
from fm_assets.stages.record_stage import RecordStage, Rejection
from fm_assets.steps.decontam import ContaminationIndex, load_default_eval_index


class DecontaminateStage(RecordStage):
    name = "decontaminate"
    code_version = "decontam-v1"
    upstream = "normalize"
    description = "Eval-set n-gram overlap removal."

    @cached_property
    def index(self) -> ContaminationIndex:
        return load_default_eval_index()

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"enabled": ctx.settings.decontaminate, "min_matches": ctx.settings.decontam_min_matches}

    def extra_inputs(self, ctx: StageContext) -> dict[str, str]:
        return {"eval_index": self.index.fingerprint()} if ctx.settings.decontaminate else {}

    def transform(self, ctx: StageContext, record: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        if ctx.settings.decontaminate:
            matches, fraction = self.index.check(record["text"])
            if matches >= ctx.settings.decontam_min_matches:
                raise Rejection("eval_contamination", {"matching_ngrams": matches, "fraction": round(fraction, 6)})
        return record


STAGE = DecontaminateStage()
