"""normalize: Unicode NFC, whitespace and control characters; a record left empty is rejected."""

from __future__ import annotations

from typing import Any

from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.verdict import Verdict
from fm_assets.transforms.text.normalize import normalize_text


class NormalizeStage(RecordStage):
    name = "normalize"
    code_version = "normalize-v1"
    upstream = "near_dedup"
    description = "NFC, whitespace and control-character normalisation."

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        text = normalize_text(record["text"])
        if not text:
            return Verdict.drop("empty_after_normalize", {"chars_before": len(record["text"])})
        if text != record["text"]:
            metrics["changed_docs"] = metrics.get("changed_docs", 0) + 1
        return Verdict.kept({**record, "text": text})


STAGE = NormalizeStage()
