"""The legal / compliance audit report, built from the stored asset-check outcomes and stage accounting.

Answers: what went into a dataset version (batches, sources, licences, namespaces), where each licence
ended up (documents and tokens; media samples), and the evidence that PII was flagged, eval leakage removed and no
record was lost (every check's outcome per batch and stage).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from fm_assets.engine import layout
from fm_assets.engine.checks import CheckOutcome, read_check_outcomes, stage_checks
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import read_ref, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.reports import compliance_sections, data_sections
from fm_assets.reports.verify import verify_root
from fm_assets.stages.names import ALL_STAGE_NAMES
from fm_assets.stages.registry import ALL_STAGES

STAGE_BY_NAME = {stage.name: stage for stage in ALL_STAGES}


def blocks_release(stage: str, check: str) -> bool:
    """Whether a failure of ``stage``'s check ``check`` stops the stages after it (and so holds the batch back
    from the release); the others are warnings."""
    spec = next((c for c in stage_checks(STAGE_BY_NAME[stage]) if c.name == check), None)
    return spec is None or (spec.blocking and not spec.warn_only)  # an unknown check: counted as blocking


def _stage_checks(
    store: ObjectStore, stage: str, batch: str
) -> tuple[StageSuccess | None, dict[str, CheckOutcome]]:
    ref = read_ref(store, stage, batch)
    if ref is None:
        return None, {}
    return read_success_at(store, ref.prefix), read_check_outcomes(store, ref.prefix)


MEDIA_CHECKS = (
    ("media_validate", "decode_failure_rate", "decode_failure_rate"),
    ("media_dedup", "duplicate_rate", "duplicate_rate"),
    ("media_near_dedup", "duplicate_rate", "duplicate_rate"),
    ("media_shard", "bucket_balance", "largest_bucket_share"),
)


def media_check_summary(stages: dict[str, Any]) -> dict[str, Any]:
    """The media checks of one batch: ``<stage>.<check>`` -> passed and the measured value."""
    summary = {}
    for stage, check, value in MEDIA_CHECKS:
        outcome = stages.get(stage, {}).get("checks", {}).get(check)
        if outcome is None or (check == "bucket_balance" and not outcome["metadata"].get("images")):
            continue  # no images, no buckets to balance
        summary[f"{stage}.{check}"] = {"passed": outcome["passed"], value: outcome["metadata"].get(value)}
    return summary


def build_audit(
    store: ObjectStore, dataset: str | None = None, *, releases_of: str | None = None
) -> dict[str, Any]:
    """The audit of every batch (or of ``dataset``'s latest release); ``releases_of`` names the dataset whose
    per-namespace releases the compliance sections describe (default: ``dataset``)."""
    batches = list_complete_batches(store)
    release = None
    if dataset and store.exists(layout.dataset_latest(dataset)):
        version = store.read_json(layout.dataset_latest(dataset))["version"]
        release = store.read_json(layout.dataset_card(dataset, version))
        batches = [entry["batch"] for entry in release["batches"]]

    per_batch = []
    licences: dict[str, dict[str, int]] = defaultdict(
        lambda: {"documents_landed": 0, "documents_in_shards": 0, "tokens": 0}
    )
    failed_checks = []
    for batch in batches:
        manifest = read_batch_manifest(store, batch)
        stages = {}
        for (
            stage
        ) in ALL_STAGE_NAMES:  # both chains: the media checks (decode failures, duplicates, buckets) too
            success, checks = _stage_checks(store, stage, batch)
            if success is None:
                continue
            stages[stage] = {
                "records_in": success.counts.records_in,
                "records_out": success.counts.records_out,
                "rejects_by_reason": success.rejects_by_reason,
                "data_version": success.data_version,
                "checks": {name: {"passed": c.passed, "metadata": c.metadata} for name, c in checks.items()},
            }
            failed_checks += [
                {"check": f"{batch}/{stage}/{name}", "blocking": blocks_release(stage, name)}
                for name, c in checks.items()
                if not c.passed
            ]
        land = stages.get("land", {})
        packed = stages.get("pack", {})
        tokens = 0
        shard_ref = read_ref(store, "shard", batch)
        if shard_ref is not None:
            tokens = read_success_at(store, shard_ref.prefix).artifacts.get("tokens", 0)
        entry = licences[manifest.license or "<missing>"]
        entry["documents_landed"] += land.get("records_in", 0)
        entry["documents_in_shards"] += packed.get("records_out", 0)
        entry["tokens"] += tokens
        pii = stages.get("pii_preflag", {}).get("checks", {}).get("pii_prevalence", {}).get("metadata", {})
        decontam = stages.get("decontaminate", {})
        per_batch.append(
            {
                "batch": batch,
                "source": manifest.source,
                "license": manifest.license,
                "namespace": manifest.namespace,
                "documents_landed": land.get("records_in", 0),
                "documents_in_shards": packed.get("records_out", 0),
                "tokens_in_shards": tokens,
                "pii_flagged_documents": pii.get("docs_flagged"),
                "pii_by_kind": pii.get("by_kind"),
                "eval_contamination_removed": decontam.get("rejects_by_reason", {}).get(
                    "eval_contamination", 0
                ),
                "media_samples_landed": stages.get("media_land", {}).get("records_out", 0),
                "media_samples_in_shards": stages.get("media_shard", {}).get("records_out", 0),
                "media_checks": media_check_summary(stages),
                "stages": stages,
            }
        )
    # stored check outcomes describe the bytes they were evaluated on: say whether those bytes are still there
    integrity = verify_root(store, dataset=dataset if release else None, quick=True)
    return {
        "dataset": release,
        "compliance": compliance_sections.build_sections(store, releases_of or dataset or ""),
        "batches": compliance_sections.with_namespaces(store, per_batch),
        "evidence": data_sections.build_evidence(store, batches),
        "licences": dict(licences),
        "failed_checks": [f["check"] for f in failed_checks],
        # blocking: the stages after the check did not run, the batch is held back; warning: it went on
        "failed_blocking_checks": [f["check"] for f in failed_checks if f["blocking"]],
        "failed_warning_checks": [f["check"] for f in failed_checks if not f["blocking"]],
        "all_checks_passed": not failed_checks and integrity.ok,
        "integrity": {
            "checked": "presence and sizes of every committed file (`fm verify` for sha256)",
            "ok": integrity.ok,
            "findings": [vars(f) for f in integrity.findings],
        },
    }


def check_verdict(audit: dict[str, Any]) -> str:
    """The audit's headline on checks: blocking failures (batches held back) apart from warnings."""
    blocking, warning = audit["failed_blocking_checks"], audit["failed_warning_checks"]
    if not blocking and not warning:
        return "all checks passed"
    warned = f"{len(warning)} warning-level check(s) failed" if warning else "no warning-level check failed"
    if not blocking:
        return f"no blocking check failed (nothing was held back by a check); {warned} (see below)"
    return (
        f"{len(blocking)} BLOCKING CHECK(S) FAILED (the stages after them did not run; those batches are held "
        f"back from releases); {warned} (see below)"
    )


def markdown_header(audit: dict[str, Any]) -> list[str]:
    dataset = audit["dataset"]
    scope = f"dataset {dataset['name']} version {dataset['version']}" if dataset else "every landed batch"
    verdict = check_verdict(audit)
    return [
        "# Compliance audit",
        "",
        f"Scope: {scope}. Result: {verdict}. Integrity: "
        f"{'no damage found' if audit['integrity']['ok'] else 'DAMAGE FOUND'} ({audit['integrity']['checked']}).",
        "",
    ]


def markdown_batches(audit: dict[str, Any]) -> list[str]:
    rows = []
    for row in audit["batches"]:
        checks = [c for stage in row["stages"].values() for c in stage["checks"].values()]
        rows.append(
            f"| {row['batch']} | {row['source']} | {row['license']} | {row['namespace']} | "
            f"{row.get('effective_namespace') or '-'} | {row['documents_landed']:,} | {row['documents_in_shards']:,} | "
            f"{sum(1 for c in checks if c['passed'])}/{len(checks)} | "
            f"{compliance_sections.release_status(audit, row['batch'])} |"
        )
    header = [
        "## Batches",
        "",
        "| batch | source | licence | landed as | namespace | docs landed | docs in shards | checks passed | release |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    failed = [f"- failed check: {name}" for name in audit["failed_checks"]]
    return [*header, *rows, "", *failed, *([""] if failed else [])]


# Each section renders a list of Markdown lines from the audit; add a section by appending its function.
MARKDOWN_SECTIONS: list[Callable[[dict[str, Any]], list[str]]] = [
    markdown_header,
    compliance_sections.markdown_releases,
    markdown_batches,
    compliance_sections.markdown_quarantine,
    compliance_sections.markdown_licences,
    compliance_sections.markdown_revocations,
    compliance_sections.markdown_training_runs,
    data_sections.markdown_pii,
    data_sections.markdown_contamination,
    data_sections.markdown_quality,
]


def render_markdown(audit: dict[str, Any]) -> str:
    """The audit as a Markdown document someone can attach to a ticket."""
    return "\n".join(line for section in MARKDOWN_SECTIONS for line in section(audit)) + "\n"
