"""``card.md``: the dataset card's facts as Markdown a person reads, with the plots embedded."""

from __future__ import annotations

from typing import Any

from fm_assets.compliance.revocations import revoked_notice
from fm_assets.engine import markdown

PLOT_TITLES = {
    "stage_funnel.svg": "Documents after each stage",
    "languages.svg": "Languages",
    "quality_scores.svg": "Quality scores",
    "tokens_by_source.svg": "Tokens per source",
}


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2%}"


def _mb(value: int) -> str:
    return f"{value / 1e6:,.2f}"


def render_markdown(card: dict[str, Any]) -> str:
    lines = [f"# Dataset card: {card['name']} {card['version']}", ""]
    lines += revoked_notice(card.get("revoked"))
    if card.get("namespace"):
        lines += [f"Namespace: **{card['namespace']}**", ""]
    lines += _table(
        ["rows", "tokens", "sequence length", "vocab size", "tokenizer sha256", "packing efficiency"],
        [
            [
                f"{card.get('rows', 0):,}",
                f"{card.get('tokens', 0):,}",
                card.get("seq_len"),
                card.get("vocab_size"),
                f"`{card.get('tokenizer_sha256')}`",
                _pct(card.get("packing_efficiency")),
            ]
        ],
    )
    lines += ["## Sources, licences and namespaces", ""]
    lines += _table(
        ["source", "licence", "namespace", "batches", "documents landed", "documents in shards", "tokens"],
        [
            [s["source"], s["license"], s["namespace"], s["batches"], f"{s['documents_landed']:,}",
             f"{s['documents_in_shards']:,}", f"{s['tokens']:,}"]
            for s in card.get("sources", [])
        ],
    )  # fmt: skip
    if card.get("held_back"):
        lines += ["Held back (not in this version):", ""]
        lines += [
            f"- `{entry['batch']}`: {markdown.escape(entry['reason'])}" for entry in card["held_back"]
        ] + [""]
    total = sum(card.get("languages", {}).values()) or 1
    lines += ["## Languages", ""]
    lines += _table(
        ["language", "documents", "share"],
        [[lang, f"{n:,}", _pct(n / total)] for lang, n in list(card.get("languages", {}).items())[:20]],
    )
    lines += ["## Stages", ""]
    lines += _table(
        ["stage", "code version", "in", "out", "rejected", "top reasons"],
        [
            [r["stage"], ", ".join(r["code_version"]), f"{r['records_in']:,}", f"{r['records_out']:,}",
             f"{r['records_rejected']:,}", ", ".join(f"{reason} ({n:,})" for reason, n in r["top_reasons"]) or "-"]
            for r in card.get("stages", [])
        ],
    )  # fmt: skip
    dup = card.get("duplicates", {})
    lines += [
        f"Exact-duplicate rate: **{_pct(dup.get('exact_duplicate_rate'))}**; "
        f"near-duplicate rate: **{_pct(dup.get('near_duplicate_rate'))}** (documents removed / documents in).",
        "",
    ]
    contamination = card.get("contamination", {})
    lines += ["## Evaluation contamination", ""]
    lines += [f"Documents removed: **{contamination.get('documents_removed', 0):,}**", ""]
    lines += _table(
        ["benchmark", "source", "passages", "sha256", "documents removed"],
        [
            [b["name"], b.get("source", "?"), b.get("passages", "?"), f"`{str(b.get('sha256', '?'))[:16]}`",
             f"{b['removed']:,}"]
            for b in contamination.get("benchmarks", [])
        ],
    )  # fmt: skip
    quality = card.get("quality", {})
    lines += ["## Quality", ""]
    models = ", ".join(f"`{m[:16]}`" for m in quality.get("models", [])) or "none (heuristic rules only)"
    lines += [
        f"Score: {quality.get('score')}; model: {models}; threshold: {quality.get('min_score') or 'n/a'}; "
        f"documents rejected by the model: {quality.get('rejected_by_model', 0):,}.",
        "",
    ]
    lines += _table(
        ["score decile", *[f"{i / 10:.1f}" for i in range(10)]],
        [["curated documents", *quality.get("curated_histogram_deciles", [0] * 10)]],
    )
    pii = card.get("pii", {})
    lines += ["## Personal data", ""]
    lines += [
        f"Documents checked: {pii.get('documents_checked', 0):,}; flagged: {pii.get('documents_flagged', 0):,}; "
        f"policy version(s): {', '.join(pii.get('policy_versions', []))}; NER: {', '.join(pii.get('ner', []))}.",
        "",
    ]
    lines += _table(
        ["decision", "documents"], [[a, f"{n:,}"] for a, n in pii.get("decisions_by_action", {}).items()]
    )
    lines += _table(["kind", "spans"], [[k, f"{n:,}"] for k, n in pii.get("spans_by_kind", {}).items()])
    cost = card.get("cost", {})
    lines += ["## Cost", ""]
    lines += _table(
        ["stage", "CPU s", "read MB", "written MB", "stored MB", "tokens"],
        [
            [r["stage"], f"{r['cpu_seconds']:.2f}", _mb(r["bytes_read"]), _mb(r["bytes_written"]),
             _mb(r["bytes_stored"]), f"{r['tokens']:,}"]
            for r in cost.get("by_stage", [])
        ],
    )  # fmt: skip
    lines += _table(
        ["source", "CPU s", "stored MB", "tokens in shards"],
        [
            [r["source"], f"{r['cpu_seconds']:.2f}", _mb(r["bytes_stored"]), f"{r['tokens']:,}"]
            for r in cost.get("by_source", [])
        ],
    )
    lines += ["## Plots", ""]
    lines += [f"![{PLOT_TITLES.get(p, p)}]({p})" for p in card.get("plots", [])] + [""]
    lines += ["## Code versions", ""]
    lines += [f"- pipeline: `{card.get('code_version') or 'n/a'}`"]
    lines += [
        f"- {stage}: {', '.join(versions)}" for stage, versions in card.get("code_versions", {}).items()
    ]
    lines += ["", "## Known limitations", ""]
    lines += [f"- {item}" for item in card.get("known_limitations", [])] + [""]
    return "\n".join(lines)
