"""Audit evidence about the data itself, per batch: PII policy decisions (with their decision logs),
contamination removed per benchmark, and the quality model's verdicts; plus their Markdown sections.

Read from each stage's current ``_SUCCESS.json`` and the PII decision logs it lists, so the evidence is
what the stages committed, not a recomputation.
"""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import read_ref, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.decontaminate import removals_by_benchmark
from fm_assets.stages.filter import MODEL_REASON, model_score_histogram
from fm_assets.stages.pii_preflag import DECISIONS_PREFIX, pii_actions


def _current(store: ObjectStore, stage: str, batch: str) -> StageSuccess | None:
    ref = read_ref(store, stage, batch)
    return None if ref is None else read_success_at(store, ref.prefix)


def _decisions_logged(store: ObjectStore, success: StageSuccess) -> int:
    total = 0
    for name in success.files:
        if name.startswith(DECISIONS_PREFIX):
            with store.open(layout.in_output(success.prefix, name)) as handle:
                total += pq.ParquetFile(handle).metadata.num_rows
    return total


def pii_evidence(store: ObjectStore, batch: str) -> dict[str, Any] | None:
    success = _current(store, "pii_preflag", batch)
    if success is None:
        return None
    flagged = int(success.extra.get("pii_docs", 0))
    logged = _decisions_logged(store, success)
    policy = success.config.get("pii_policy", {})
    return {
        "policy_version": policy.get("version"),
        "policy": {k: v for k, v in policy.items() if k != "version"},
        "ner": success.config.get("ner", "off"),
        "documents_checked": int(success.extra.get("pii_checked_docs", 0)),
        "documents_flagged": flagged,
        "decisions_by_action": pii_actions(success),
        "decisions_logged": logged,
        "every_decision_logged": logged == flagged,
        "decision_logs": sorted(n for n in success.files if n.startswith(DECISIONS_PREFIX)),
        "output": success.prefix,
    }


def contamination_evidence(store: ObjectStore, batch: str) -> dict[str, Any] | None:
    success = _current(store, "decontaminate", batch)
    if success is None:
        return None
    spec = success.artifacts.get("eval_registry")
    entries = spec.get("entries", []) if isinstance(spec, dict) else []
    return {
        "eval_index": success.inputs.get("eval_index"),
        "documents_scanned": int(success.extra.get("eval_scanned_docs", 0)),
        "documents_removed": success.rejects_by_reason.get("eval_contamination", 0),
        "removed_by_benchmark": removals_by_benchmark(success),
        "benchmarks": [{k: e[k] for k in ("name", "sha256", "passages")} for e in entries],
    }


def quality_evidence(store: ObjectStore, batch: str) -> dict[str, Any] | None:
    success = _current(store, "filter", batch)
    if success is None:
        return None
    return {
        "model": success.inputs.get("quality_model"),
        "min_score": success.artifacts.get("quality_model", {}).get("min_score"),
        "rejected_by_model": success.rejects_by_reason.get(MODEL_REASON, 0),
        "scored_histogram_deciles": model_score_histogram(success),
        "rejected_by_rules": sum(
            n for reason, n in success.rejects_by_reason.items() if reason.startswith("quality:")
        ),
    }


def build_evidence(store: ObjectStore, batches: list[str]) -> dict[str, dict[str, Any]]:
    """batch -> {"pii", "contamination", "quality"} (a stage without output: None)."""
    return {
        batch: {
            "pii": pii_evidence(store, batch),
            "contamination": contamination_evidence(store, batch),
            "quality": quality_evidence(store, batch),
        }
        for batch in batches
    }


def _rows(audit: dict[str, Any], kind: str) -> list[tuple[str, dict[str, Any]]]:
    return [(b, e[kind]) for b, e in sorted(audit.get("evidence", {}).items()) if e.get(kind) is not None]


def markdown_pii(audit: dict[str, Any]) -> list[str]:
    rows = _rows(audit, "pii")
    lines = [
        "## Personal data: policy decisions",
        "",
        "Every flagged document got its namespace's policy action; each decision (doc id, kinds, span count, "
        "action, policy version, detectors) is in the batch's decision log.",
        "",
        "| batch | policy version | NER | checked | flagged | redact | drop | keep | decisions logged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for batch, e in rows:
        actions = e["decisions_by_action"]
        logged = f"{e['decisions_logged']:,}" + ("" if e["every_decision_logged"] else " (INCOMPLETE)")
        lines.append(
            f"| {batch} | `{e['policy_version']}` | {e['ner']} | {e['documents_checked']:,} | "
            f"{e['documents_flagged']:,} | {actions.get('redact', 0):,} | {actions.get('drop', 0):,} | "
            f"{actions.get('keep', 0):,} | {logged} |"
        )
    return [*lines, ""]


def markdown_contamination(audit: dict[str, Any]) -> list[str]:
    rows = _rows(audit, "contamination")
    names = sorted(
        {b["name"] for _, e in rows for b in e["benchmarks"]}
        | {n for _, e in rows for n in e["removed_by_benchmark"]}
    )
    lines = [
        "## Evaluation contamination: removals per benchmark",
        "",
        "| batch | eval index | scanned | removed | " + " | ".join(names) + " |",
        "|---|---|---|---|" + "---|" * len(names),
    ]
    for batch, e in rows:
        per = [f"{e['removed_by_benchmark'].get(name, 0):,}" for name in names]
        lines.append(
            f"| {batch} | `{e['eval_index']}` | {e['documents_scanned']:,} | {e['documents_removed']:,} | "
            + " | ".join(per)
            + " |"
        )
    registered = {b["name"]: b for _, e in rows for b in e["benchmarks"]}
    if registered:
        lines += ["", "Registered benchmarks (sha256 of their passages):", ""]
        lines += [f"- {n}: {b['passages']} passages, `{b['sha256']}`" for n, b in sorted(registered.items())]
    return [*lines, ""]


def markdown_quality(audit: dict[str, Any]) -> list[str]:
    lines = [
        "## Quality filtering",
        "",
        "| batch | quality model | threshold | rejected by model | rejected by rules | scored per decile |",
        "|---|---|---|---|---|---|",
    ]
    for batch, e in _rows(audit, "quality"):
        model = f"`{e['model'][:16]}`" if e["model"] else "none"
        lines.append(
            f"| {batch} | {model} | {e['min_score'] if e['min_score'] is not None else '-'} | "
            f"{e['rejected_by_model']:,} | {e['rejected_by_rules']:,} | "
            f"{' '.join(str(n) for n in e['scored_histogram_deciles'])} |"
        )
    return [*lines, ""]
