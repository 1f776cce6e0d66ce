"""The legal / compliance audit report, built from the stored asset-check outcomes and stage accounting.

Answers: what went into a dataset version (batches, sources, licences, namespaces), where each licence
ended up (documents and tokens), and the evidence that PII was flagged, eval leakage removed and no
record was lost (every check's outcome per batch and stage).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fm_assets.landing import list_complete_batches, read_batch_manifest
from fm_assets.pipeline import STAGE_NAMES
from fm_assets.refs import read_ref
from fm_resources.object_store import ObjectStore

CHECKS_FILE = "_checks.json"


def _stage_checks(store: ObjectStore, stage: str, batch: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    ref = read_ref(store, stage, batch)
    if ref is None:
        return None, {}
    success = store.read_json(f"{ref['prefix']}/_SUCCESS.json")
    checks_rel = f"{ref['prefix']}/{CHECKS_FILE}"
    return success, store.read_json(checks_rel) if store.exists(checks_rel) else {}


def build_audit(store: ObjectStore, dataset: str | None = None) -> dict[str, Any]:
    batches = list_complete_batches(store)
    release = None
    if dataset and store.exists(f"datasets/{dataset}/LATEST.json"):
        version = store.read_json(f"datasets/{dataset}/LATEST.json")["version"]
        release = store.read_json(f"datasets/{dataset}/{version}/card.json")
        batches = [entry["batch"] for entry in release["batches"]]

    per_batch = []
    licences: dict[str, dict[str, int]] = defaultdict(lambda: {"documents_landed": 0, "documents_in_shards": 0, "tokens": 0})
    failed_checks = []
    for batch in batches:
        manifest = read_batch_manifest(store, batch)
        stages = {}
        for stage in STAGE_NAMES:
            success, checks = _stage_checks(store, stage, batch)
            if success is None:
                continue
            stages[stage] = {
                "records_in": success["counts"]["records_in"],
                "records_out": success["counts"]["records_out"],
                "rejects_by_reason": success["rejects_by_reason"],
                "data_version": success["data_version"],
                "checks": {name: {"passed": c["passed"], "metadata": c["metadata"]} for name, c in checks.items()},
            }
            failed_checks += [f"{batch}/{stage}/{name}" for name, c in checks.items() if not c["passed"]]
        land = stages.get("land", {})
        packed = stages.get("pack", {})
        tokens = 0
        shard_ref = read_ref(store, "shard", batch)
        if shard_ref is not None:
            tokens = store.read_json(f"{shard_ref['prefix']}/_SUCCESS.json")["artifacts"].get("tokens", 0)
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
                "eval_contamination_removed": decontam.get("rejects_by_reason", {}).get("eval_contamination", 0),
                "stages": stages,
            }
        )
    return {
        "dataset": release,
        "batches": per_batch,
        "licences": dict(licences),
        "failed_checks": failed_checks,
        "all_checks_passed": not failed_checks,
    }
