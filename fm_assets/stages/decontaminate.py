"""decontaminate: drop documents that share word n-grams with the evaluation sets (mandatory before shards)."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from fm_assets.checks import CheckOutcome, StageCheck
from fm_assets.stage import StageContext
from fm_assets.stage_runtime import iter_parquet_batches
from fm_assets.stages.record_stage import RecordStage, Rejection
from fm_assets.steps.decontam import ContaminationIndex, load_default_eval_index


def check_no_contamination(store, success: dict[str, Any], stage: Any) -> CheckOutcome:
    """Re-scan every kept document against the eval index: none may match (blocking: leakage must not reach shards)."""
    if not success["config"]["enabled"]:
        return CheckOutcome(True, {"enabled": False}, "decontamination disabled by configuration")
    min_matches = success["config"]["min_matches"]
    leaked = scanned = 0
    for part in success["parts"]:
        for record_batch in iter_parquet_batches(store, part, columns=["text"]):
            for text in record_batch["text"].to_pylist():
                scanned += 1
                leaked += stage.index.check(text)[0] >= min_matches
    removed = success["rejects_by_reason"].get("eval_contamination", 0)
    return CheckOutcome(
        leaked == 0,
        {"scanned": scanned, "contaminated_in_output": leaked, "removed": removed, "eval_index": stage.index.fingerprint()},
        "no kept document shares an eval n-gram",
    )


class DecontaminateStage(RecordStage):
    name = "decontaminate"
    code_version = "decontam-v1"
    upstream = "normalize"
    description = "Eval-set n-gram overlap removal."
    checks = (StageCheck("no_eval_contamination", "kept documents do not overlap the eval sets", check_no_contamination),)

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
