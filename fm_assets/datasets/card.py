"""The dataset card of a release: the facts a reader (legal, a trainer) asks about one dataset version.

``write_card`` is called by the release assembly with the basic card (batches, rows, tokens, tokenizer); it
adds, from the stage outputs of the released batches: sources, licences and namespaces with documents and
tokens; the language distribution and quality-score distribution of the curated documents; every stage's
in/out/rejected with its top reasons; exact and near-duplicate rates; contamination removed per benchmark;
PII policy decisions; packing efficiency; code versions; cost; known limitations. It writes ``card.md``
with SVG plots beside it (``card_plots``) and returns the enriched dict the release stores as ``card.json``.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from typing import Any

from fm_assets.datasets.card_plots import render_plots
from fm_assets.datasets.card_render import render_markdown
from fm_assets.engine import layout
from fm_assets.engine.landing import read_batch_manifest
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import read_ref, read_success_at
from fm_assets.engine.store import ObjectStore, iter_parquet_batches
from fm_assets.reports.cost import cost_rows, cost_totals
from fm_assets.stages.decontaminate import removals_by_benchmark
from fm_assets.stages.filter import model_score_histogram
from fm_assets.stages.names import CHAIN_NAMES, TEXT
from fm_assets.stages.pii_preflag import pii_actions

log = logging.getLogger(__name__)

TEXT_STAGE_NAMES = CHAIN_NAMES[TEXT]  # this card describes a text release

CURATED_STAGE = "decontaminate"  # the last document-level stage: what reaches the tokenizer
TOP_REASONS = 3
SCORE_BINS = 10
CARD_MD = "card.md"

STANDING_LIMITATIONS: tuple[str, ...] = (
    "Contamination is checked against the registered benchmarks only (word 13-grams, after NFC and "
    "lowercasing). lm-eval's test splits are not shipped offline, so only their few-shot examples are "
    "registered; unspaced scripts (zh, ja, th) are not covered by word n-grams.",
    "PII detection is pattern-based (emails, phones, IPs, cards, IBANs, US SSNs); names and addresses are found "
    "only where the namespace's PII policy turns NER on (English model only).",
    "The quality model, when one is pinned, was trained on documentation pages against synthetically damaged "
    "copies; it measures 'reads like edited prose', not factual quality or topic.",
    "Language shares count documents, not tokens.",
)


def _success(store: ObjectStore, stage: str, batch: str) -> StageSuccess | None:
    ref = read_ref(store, stage, batch)
    return None if ref is None else read_success_at(store, ref.prefix)


def _stage_table(outputs: dict[str, list[StageSuccess]]) -> list[dict[str, Any]]:
    rows = []
    for stage in TEXT_STAGE_NAMES:
        successes = outputs.get(stage, [])
        if not successes:
            continue
        reasons: Counter[str] = Counter()
        for success in successes:
            reasons.update(success.rejects_by_reason)
        rows.append(
            {
                "stage": stage,
                "code_version": sorted({s.code_version for s in successes}),
                "records_in": sum(s.counts.records_in for s in successes),
                "records_out": sum(s.counts.records_out for s in successes),
                "records_rejected": sum(s.counts.records_rejected for s in successes),
                "top_reasons": reasons.most_common(TOP_REASONS),
            }
        )
    return rows


def _rate(rows: list[dict[str, Any]], stage: str) -> float | None:
    row = next((r for r in rows if r["stage"] == stage), None)
    if row is None or not row["records_in"]:
        return None
    return round(row["records_rejected"] / row["records_in"], 6)


def _curated_distributions(store: ObjectStore, outputs: list[StageSuccess]) -> tuple[Counter[str], list[int]]:
    """Documents per language and per quality-score decile over the curated documents (column reads only)."""
    languages: Counter[str] = Counter()
    histogram = [0] * SCORE_BINS
    for success in outputs:
        for part in success.parts:
            for batch in iter_parquet_batches(store, part, columns=["lang", "quality_score"]):
                languages.update(lang or "unknown" for lang in batch["lang"].to_pylist())
                for score in batch["quality_score"].to_pylist():
                    if score is not None:
                        histogram[min(SCORE_BINS - 1, max(0, int(score * SCORE_BINS)))] += 1
    return languages, histogram


def _contamination(outputs: list[StageSuccess]) -> dict[str, Any]:
    removed: Counter[str] = Counter()
    entries: dict[str, dict[str, Any]] = {}
    for success in outputs:
        removed.update(removals_by_benchmark(success))
        spec = success.artifacts.get("eval_registry")
        for entry in spec.get("entries", []) if isinstance(spec, dict) else []:
            entries[entry["name"]] = entry
    benchmarks = [{**entry, "removed": removed.get(name, 0)} for name, entry in sorted(entries.items())]
    for name in sorted(set(removed) - set(entries)):
        benchmarks.append({"name": name, "removed": removed[name]})
    return {
        "documents_removed": sum(s.rejects_by_reason.get("eval_contamination", 0) for s in outputs),
        "benchmarks": benchmarks,
    }


def _pii(outputs: list[StageSuccess]) -> dict[str, Any]:
    actions: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for success in outputs:
        actions.update(pii_actions(success))
        kinds.update(
            {
                k.removeprefix("pii_"): int(v)
                for k, v in success.extra.items()
                if k.startswith("pii_") and ":" not in k and k not in ("pii_docs", "pii_checked_docs")
            }
        )
    return {
        "documents_checked": sum(int(s.extra.get("pii_checked_docs", 0)) for s in outputs),
        "documents_flagged": sum(int(s.extra.get("pii_docs", 0)) for s in outputs),
        "decisions_by_action": dict(sorted(actions.items())),
        "spans_by_kind": dict(sorted(kinds.items())),
        "policy_versions": sorted({str(s.config.get("pii_policy", {}).get("version")) for s in outputs}),
        "ner": sorted({str(s.config.get("ner", "off")) for s in outputs}),
    }


def _quality(filter_outputs: list[StageSuccess], curated_histogram: list[int]) -> dict[str, Any]:
    models = sorted({s.inputs["quality_model"] for s in filter_outputs if "quality_model" in s.inputs})
    scored = [0] * SCORE_BINS
    for success in filter_outputs:
        scored = [a + b for a, b in zip(scored, model_score_histogram(success), strict=True)]
    thresholds = [s.artifacts.get("quality_model", {}).get("min_score") for s in filter_outputs]
    return {
        "score": "model" if models else "heuristic",
        "models": models,
        "min_score": sorted({t for t in thresholds if t is not None}),
        "curated_histogram_deciles": curated_histogram,
        "scored_histogram_deciles": scored,
        "rejected_by_model": sum(s.rejects_by_reason.get("quality_model", 0) for s in filter_outputs),
    }


def _packing(outputs: list[StageSuccess]) -> float | None:
    weighted = [
        (float(s.artifacts["packing_efficiency"]), int(s.extra.get("tokens", 0)))
        for s in outputs
        if s.artifacts.get("packing_efficiency") is not None
    ]
    total = sum(tokens for _, tokens in weighted)
    if not weighted:
        return None
    if not total:
        return round(sum(eff for eff, _ in weighted) / len(weighted), 6)
    return round(sum(eff * tokens for eff, tokens in weighted) / total, 6)


def _sources(store: ObjectStore, card: dict[str, Any], outputs: dict[str, list[StageSuccess]]) -> list[dict]:
    tokens = {entry["batch"]: entry.get("tokens", 0) for entry in card.get("batches", [])}
    landed = {s.batch: s.counts.records_in for s in outputs.get("land", [])}
    packed = {s.batch: s.counts.records_out for s in outputs.get("pack", [])}
    grouped: dict[tuple[str, str, str], dict[str, Any]] = defaultdict(
        lambda: {"batches": 0, "documents_landed": 0, "documents_in_shards": 0, "tokens": 0}
    )
    for batch in tokens:
        manifest = read_batch_manifest(store, batch)
        entry = grouped[(manifest.source, manifest.license, card.get("namespace") or manifest.namespace)]
        entry["batches"] += 1
        entry["documents_landed"] += landed.get(batch, 0)
        entry["documents_in_shards"] += packed.get(batch, 0)
        entry["tokens"] += tokens[batch]
    return [
        {"source": source, "license": licence, "namespace": namespace, **entry}
        for (source, licence, namespace), entry in sorted(grouped.items())
    ]


def card_facts(store: ObjectStore, card: dict[str, Any]) -> dict[str, Any]:
    """Everything the card says beyond the release's own fields, read from the released batches' outputs."""
    batches = [entry["batch"] for entry in card.get("batches", [])]
    outputs: dict[str, list[StageSuccess]] = {}
    for stage in TEXT_STAGE_NAMES:
        found = [s for s in (_success(store, stage, batch) for batch in batches) if s is not None]
        if found:
            outputs[stage] = found
    stages = _stage_table(outputs)
    languages, curated_histogram = _curated_distributions(store, outputs.get(CURATED_STAGE, []))
    quality = _quality(outputs.get("filter", []), curated_histogram)
    pii = _pii(outputs.get("pii_preflag", []))
    limitations: list[str] = list(STANDING_LIMITATIONS)
    if quality["score"] == "heuristic":
        limitations.append("No quality model was pinned: quality is the heuristic rules' score only.")
    if pii["ner"] == ["off"]:
        limitations.append(
            "NER was off for every released batch: person names and addresses were not looked for."
        )
    costs = cost_rows(store, batches, chains=(TEXT,))
    return {
        "sources": _sources(store, card, outputs),
        "languages": dict(languages.most_common()),
        "stages": stages,
        "duplicates": {
            "exact_duplicate_rate": _rate(stages, "dedup"),
            "near_duplicate_rate": _rate(stages, "near_dedup"),
        },
        "contamination": _contamination(outputs.get("decontaminate", [])),
        "quality": quality,
        "pii": pii,
        "packing_efficiency": _packing(outputs.get("pack", [])),
        "code_versions": {row["stage"]: row["code_version"] for row in stages},
        "cost": {
            "by_stage": [
                {"stage": stage, **_sum(r for r in costs if r["stage"] == stage)}
                for stage in TEXT_STAGE_NAMES
                if any(r["stage"] == stage for r in costs)
            ],
            "by_source": cost_totals(costs, "source"),
            "by_namespace": cost_totals(costs, "namespace"),
        },
        "known_limitations": limitations,
    }


def _sum(rows: Any) -> dict[str, Any]:
    total = {"cpu_seconds": 0.0, "bytes_read": 0, "bytes_written": 0, "bytes_stored": 0, "tokens": 0}
    for row in rows:
        for name in total:
            total[name] += row[name]
    total["cpu_seconds"] = round(total["cpu_seconds"], 4)
    return total


def write_card(store: ObjectStore, name: str, version: str, card: dict[str, Any]) -> dict[str, Any]:
    """Write ``card.md`` and its plots into the version's folder; return ``card`` enriched (for card.json)."""
    folder = layout.dataset_dir(name, version)
    enriched = {**card, **card_facts(store, card)}
    plots = render_plots(enriched)
    for file_name, data in plots.items():
        store.write_bytes(f"{folder}/{file_name}", data)
    enriched["plots"] = sorted(plots)
    store.write_bytes(f"{folder}/{CARD_MD}", render_markdown(enriched).encode("utf-8"))
    log.info("dataset card %s/%s written with %d plots", name, version, len(plots))
    return enriched
