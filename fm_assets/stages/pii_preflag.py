"""pii_preflag: find PII (regex pass, plus NER where the policy asks) and apply the namespace's PII policy.

Per the policy (``transforms.text.pii_policy``, its version in the stage key) a flagged document is redacted
(spans replaced by ``<EMAIL>``, ``<PERSON>``, ...), dropped (rejected with reason ``pii_policy_drop``) or kept
as it is; the detected kinds ride along in ``pii_flags`` either way. Every decision on a flagged document is
logged in ``pii-decisions-<unit>.parquet`` (doc id, namespace, kinds, span count, action, policy version,
detectors), committed and hashed with the unit. Unreviewed quarantine batches never get here: the land
stage refuses them (``compliance.namespaces``).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult
from fm_assets.engine.unit_writer import PARQUET_OPTIONS
from fm_assets.transforms.text.pii import find_pii_spans
from fm_assets.transforms.text.pii_ner import find_entities, ner_version
from fm_assets.transforms.text.pii_policy import PiiPolicy, load_policy, redact

MAX_PII_DOC_FRACTION = 0.05
DROP_REASON = "pii_policy_drop"
ACTION_PREFIX = "pii_action:"  # + action: flagged documents that got that action
DECISIONS_PREFIX = "pii-decisions-"

DECISION_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("namespace", pa.string()),
        ("kinds", pa.list_(pa.string())),
        ("spans", pa.int64()),
        ("action", pa.string()),
        ("policy_version", pa.string()),
        ("detectors", pa.string()),
    ]
)


def decisions_name(unit_id: str) -> str:
    return f"{DECISIONS_PREFIX}{unit_id}.parquet"


def check_pii_prevalence(store, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Warn when more than 5% of documents carry PII: the source may need a closer look before release."""
    extra = success.extra
    checked = extra.get("pii_checked_docs", 0)
    flagged = extra.get("pii_docs", 0)
    fraction = flagged / checked if checked else 0.0
    kinds = {
        k.removeprefix("pii_"): v
        for k, v in extra.items()
        if k.startswith("pii_")
        and k not in ("pii_docs", "pii_checked_docs")
        and not k.startswith(ACTION_PREFIX)
    }
    return CheckOutcome(
        fraction <= MAX_PII_DOC_FRACTION,
        {
            "docs_checked": checked,
            "docs_flagged": flagged,
            "flagged_fraction": round(fraction, 5),
            "by_kind": kinds,
            "by_action": pii_actions(success),
            "policy_version": success.config.get("pii_policy", {}).get("version"),
        },
        f"at most {MAX_PII_DOC_FRACTION:.0%} of documents carry PII",
    )


def pii_actions(success: StageSuccess) -> dict[str, int]:
    """Flagged documents per policy action (redact, drop, keep)."""
    return {
        k.removeprefix(ACTION_PREFIX): int(v)
        for k, v in sorted(success.extra.items())
        if k.startswith(ACTION_PREFIX)
    }


def _count(metrics: dict[str, Any], key: str, by: int = 1) -> None:
    metrics[key] = metrics.get(key, 0) + by


class PiiPreflagStage(Stage):
    name = "pii_preflag"
    code_version = "pii-v2"
    upstream = "validate"
    description = "PII detection (regex; NER where the policy asks) and the per-namespace PII policy."
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
        policy = load_policy(ctx.settings.pii_policy_file)
        config: dict[str, Any] = {"pii_policy": {"version": policy.version, **policy.to_json()}}
        if policy.uses_ner:
            config["ner"] = ner_version()
        return config

    def prepare(self, ctx: StageContext, units: list, output_prefix: str) -> PiiPolicy:
        return load_policy(ctx.settings.pii_policy_file)

    def process(self, unit: UnitContext) -> UnitResult:
        policy: PiiPolicy = unit.prepared
        records_in = 0
        metrics: dict[str, Any] = {}
        decisions: list[dict[str, Any]] = []
        for part in unit.unit.inputs:
            for record in unit.iter_rows(part):
                records_in += 1
                self._apply(unit, policy, record, metrics, decisions)
        table = pa.Table.from_pylist(decisions, schema=DECISION_SCHEMA)
        sink = io.BytesIO()
        pq.write_table(table, sink, **PARQUET_OPTIONS)
        unit.writer.add_file(decisions_name(unit.unit.unit_id), sink.getvalue())
        return UnitResult(records_in=records_in, extra=metrics)

    def _apply(
        self,
        unit: UnitContext,
        policy: PiiPolicy,
        record: dict[str, Any],
        metrics: dict[str, Any],
        decisions: list[dict[str, Any]],
    ) -> None:
        text = record["text"]
        rule = policy.rule(record["namespace"])
        spans = find_pii_spans(text)
        detectors = "regex"
        if rule.ner == "always" or (rule.ner == "flagged" and spans):
            spans = {**spans, **find_entities(text)}
            detectors = "regex+ner"
            _count(metrics, "ner_checked_docs")
        _count(metrics, "pii_checked_docs")
        if not spans:
            unit.write(record)
            return
        kinds = sorted(spans)
        span_count = sum(len(found) for found in spans.values())
        _count(metrics, "pii_docs")
        for kind, found in spans.items():
            _count(metrics, f"pii_{kind}", len(found))
        _count(metrics, ACTION_PREFIX + rule.action)
        decisions.append(
            {
                "doc_id": record["doc_id"],
                "namespace": record["namespace"],
                "kinds": kinds,
                "spans": span_count,
                "action": rule.action,
                "policy_version": policy.version,
                "detectors": detectors,
            }
        )
        if rule.action == "drop":
            unit.reject(
                record, DROP_REASON, {"kinds": kinds, "spans": span_count, "policy_version": policy.version}
            )
            return
        new_text = redact(text, spans) if rule.action == "redact" else text
        unit.write({**record, "text": new_text, "pii_flags": json.dumps(kinds)})


STAGE = PiiPreflagStage()
