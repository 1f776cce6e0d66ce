"""normalize: Unicode NFC, whitespace and control characters; a record left empty is rejected."""

from __future__ import annotations

from typing import Any

from fm_assets.stage import StageContext
from fm_assets.stages.record_stage import RecordStage, Rejection
from fm_assets.steps.normalize_text import normalize_text


class NormalizeStage(RecordStage):
    name = "normalize"
    code_version = "normalize-v1"
    upstream = "near_dedup"
    description = "NFC, whitespace and control-character normalisation."

    def transform(self, ctx: StageContext, record: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        text = normalize_text(record["text"])
        if not text:
            raise Rejection("empty_after_normalize", {"chars_before": len(record["text"])})
        if text != record["text"]:
            extra["changed_docs"] = extra.get("changed_docs", 0) + 1
        return {**record, "text": text}


STAGE = NormalizeStage()
