"""pii_preflag: flag PII kinds per record (kept, not removed) and quarantine the quarantine namespace."""

from __future__ import annotations

import json
from typing import Any

from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.stage import StageContext
from fm_assets.engine.verdict import Verdict
from fm_assets.transforms.text.pii import find_pii

MAX_PII_DOC_FRACTION = 0.05


def check_pii_prevalence(store, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Warn when more than 5% of documents carry PII: the source may need a scrubbing pass before release."""
    extra = success.extra
    checked = extra.get("pii_checked_docs", 0)
    flagged = extra.get("pii_docs", 0)
    fraction = flagged / checked if checked else 0.0
    kinds = {
        k.removeprefix("pii_"): v
        for k, v in extra.items()
        if k.startswith("pii_") and k not in ("pii_docs", "pii_checked_docs")
    }
    return CheckOutcome(
        fraction <= MAX_PII_DOC_FRACTION,
        {
            "docs_checked": checked,
            "docs_flagged": flagged,
            "flagged_fraction": round(fraction, 5),
            "by_kind": kinds,
        },
        f"at most {MAX_PII_DOC_FRACTION:.0%} of documents carry PII",
    )


class PiiPreflagStage(RecordStage):
    name = "pii_preflag"
    code_version = "pii-v1"
    upstream = "validate"
    description = "PII pre-flag (emails, phones, IPs, cards, IBANs, SSNs) and namespace quarantine."
    checks = (
        StageCheck(
            "pii_prevalence",
            "share of documents with PII",
            check_pii_prevalence,
            blocking=False,
            warn_only=True,
        ),
    )

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"quarantine_namespace_rejected": ctx.settings.quarantine_namespace_rejected}

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        if ctx.settings.quarantine_namespace_rejected and record["namespace"] == "quarantine":
            return Verdict.drop("namespace_quarantine", {"namespace": record["namespace"]})
        found = {kind: count for kind, count in find_pii(record["text"]).items() if count}
        if found:
            metrics["pii_docs"] = metrics.get("pii_docs", 0) + 1
            for kind, count in found.items():
                metrics[f"pii_{kind}"] = metrics.get(f"pii_{kind}", 0) + count
        metrics["pii_checked_docs"] = metrics.get("pii_checked_docs", 0) + 1
        return Verdict.kept({**record, "pii_flags": json.dumps(sorted(found)) if found else None})


STAGE = PiiPreflagStage()
