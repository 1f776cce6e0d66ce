"""The audit's compliance sections: releases per namespace, quarantine decisions, the licence policy with
held batches and exceptions, and revocations; each as data (``fm audit --json``) and as Markdown."""

from __future__ import annotations

from typing import Any

from fm_assets.compliance import paths, training_runs
from fm_assets.compliance.licence_policy import load_policy
from fm_assets.compliance.namespaces import (
    MODALITIES,
    effective_namespace,
    media_dataset_name,
    quarantine_rows,
    release_name,
)
from fm_assets.compliance.promotions import (
    RELEASE_NAMESPACES,
)
from fm_assets.compliance.revocations import list_revocations
from fm_assets.engine import layout, markdown
from fm_assets.engine.store import ObjectStore


def releases(store: ObjectStore, dataset: str) -> list[dict[str, Any]]:
    """The newest release of every namespace and kind (text, image-text, audio-text): version, the batches with
    data in it, rows (text) or samples (media), tokens, held-back batches, revoked mark."""
    found = []
    for namespace in RELEASE_NAMESPACES:
        names = [("text", release_name(dataset, namespace))] + [
            (kind, media_dataset_name(dataset, modality, namespace)) for modality, kind in MODALITIES.items()
        ]
        for kind, name in names:
            latest = layout.dataset_latest(name)
            if not store.exists(latest):
                continue
            version = store.read_json(latest)["version"]
            card = store.read_json(layout.dataset_card(name, version))
            found.append(
                {
                    "dataset": name,
                    "kind": kind,
                    "namespace": namespace,
                    "version": version,
                    # a media-only batch is in the text card with 0 rows: it is not "in" that release
                    "batches": [
                        entry["batch"]
                        for entry in card.get("batches", [])
                        if entry.get("rows", entry.get("samples", 0))
                    ],
                    "rows": card.get("rows", card.get("samples")),
                    "tokens": card.get("tokens"),
                    "held_back": card.get("held_back", []),
                    "licence_exceptions": [b for b in card.get("batches", []) if "licence_exception" in b],
                    "revoked": card.get("revoked"),
                }
            )
    return found


def quarantine(store: ObjectStore) -> list[dict[str, Any]]:
    """Every batch landed in quarantine with its review decision (or that it still awaits one)."""
    return quarantine_rows(store)


def licence_policy(store: ObjectStore) -> dict[str, Any]:
    policy = load_policy(store)
    return {
        "origin": policy.origin,
        "sha256": policy.sha256,
        "namespaces": {
            name: {
                "categories": sorted(rule.categories),
                "licenses": sorted(rule.licenses),
                "deny": sorted(rule.deny),
            }
            for name, rule in policy.namespaces.items()
        },
        "exceptions": [exception.to_json() for exception in policy.exceptions],
    }


def revocations(store: ObjectStore) -> list[dict[str, Any]]:
    """Every revocation with the outcome of its report (if written)."""
    rows = []
    for revocation in list_revocations(store):
        report_rel = paths.revocation_report(revocation.id, "json")
        report = store.read_json(report_rel) if store.exists(report_rel) else None
        rows.append(
            {
                **revocation.to_json(),
                "report": store.uri(paths.revocation_report(revocation.id, "md")) if report else None,
                "documents": report["affected"]["documents"] if report else None,
                "dataset_versions": len(report["dataset_versions"]) if report else None,
                "marked_revoked": report.get("marked_revoked", []) if report else [],
                "verified": report["verified"] if report else None,
            }
        )
    return rows


def with_namespaces(store: ObjectStore, batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The audit's batch rows with the namespace each is processed and released in (None: not released)."""
    for row in batches:
        effective = effective_namespace(store, row["batch"])
        row["effective_namespace"] = effective.name
        row["review_status"] = effective.status
    return batches


def build_sections(store: ObjectStore, dataset: str) -> dict[str, Any]:
    return {
        "releases": releases(store, dataset),
        "quarantine": quarantine(store),
        "licence_policy": licence_policy(store),
        "revocations": revocations(store),
        "training_runs": training_runs.as_rows(training_runs.runs_per_version(store)),
    }


def markdown_releases(audit: dict[str, Any]) -> list[str]:
    lines = [
        "## Releases per namespace",
        "",
        "Each namespace is released on its own; no release holds another's data.",
        "",
    ]
    lines += markdown.table(
        ["dataset", "kind", "namespace", "version", "batches", "rows / samples", "tokens", "held back", "revoked"],
        [
            [r["dataset"], r.get("kind", "text"), r["namespace"], r["version"], len(r["batches"]), r["rows"],
             r["tokens"] if r["tokens"] is not None else "-",
             len(r["held_back"]), (r["revoked"] or {}).get("revocation_id", "no")]
            for r in audit["compliance"]["releases"]
        ],
    )  # fmt: skip
    held = [(r["dataset"], h) for r in audit["compliance"]["releases"] for h in r["held_back"]]
    lines += ["### Held-back batches", ""]
    lines += markdown.table(
        ["release", "batch", "why"],
        [[name, h["batch"], h["reason"]] for name, h in held],
    )
    return lines


def markdown_quarantine(audit: dict[str, Any]) -> list[str]:
    lines = ["## Quarantine decisions", ""]
    rows = []
    for q in audit["compliance"]["quarantine"]:
        d = q["decision"] or {}
        rows.append([q["batch"], q["source"], q["license"], q["status"], d.get("to") or "-", d.get("reviewer", "-"),
                     d.get("reason", "-"), d.get("at", "-")])  # fmt: skip
    return lines + markdown.table(
        ["batch", "source", "licence", "status", "to", "reviewer", "reason", "at"], rows
    )


def markdown_licences(audit: dict[str, Any]) -> list[str]:
    policy = audit["compliance"]["licence_policy"]
    lines = [
        "## Licence policy",
        "",
        f"Policy `{markdown.escape(policy['origin'])}` (sha256 `{policy['sha256'][:16]}`).",
        "",
    ]
    lines += markdown.table(
        ["namespace", "admitted families", "also admitted", "refused"],
        [[ns, ", ".join(r["categories"]), ", ".join(r["licenses"]) or "-", ", ".join(r["deny"]) or "-"]
         for ns, r in policy["namespaces"].items()],
    )  # fmt: skip
    lines += ["### Exceptions (approved)", ""]
    lines += markdown.table(
        ["licence", "source", "namespace", "approver", "reason", "expires"],
        [[e["license"], e["source"], e["namespace"], e["approver"], e["reason"], e["expires"] or "-"]
         for e in policy["exceptions"]],
    )  # fmt: skip
    released: dict[str, int] = {}
    for row in audit["batches"]:
        if release_status(audit, row["batch"]).startswith("released"):
            released[row["license"]] = released.get(row["license"], 0) + row["documents_in_shards"]
    lines += ["### Where each licence ended up", ""]
    lines += markdown.table(
        ["licence", "docs landed", "docs in shards", "docs in the newest releases", "tokens in shards"],
        [[lic, f"{r['documents_landed']:,}", f"{r['documents_in_shards']:,}", f"{released.get(lic, 0):,}",
          f"{r['tokens']:,}"] for lic, r in sorted(audit["licences"].items())],
    )  # fmt: skip
    return lines


def release_status(audit: dict[str, Any], batch: str) -> str:
    """Where the newest releases put ``batch``: released (in every release holding its data), held back (and
    why), or never released."""
    holding = [r["dataset"] for r in audit["compliance"]["releases"] if batch in r["batches"]]
    if holding:
        return f"released in {', '.join(holding)}"
    for release in audit["compliance"]["releases"]:
        for held in release["held_back"]:
            if held["batch"] == batch:
                return f"held back from {release['dataset']}"
    for row in audit["compliance"]["quarantine"]:
        if row["batch"] == batch and row["status"] in ("awaiting_review", "rejected"):
            return f"not released: quarantine {row['status'].replace('_', ' ')}"
    return "not released"


def markdown_training_runs(audit: dict[str, Any]) -> list[str]:
    lines = ["## Training runs per dataset version (read receipts)", ""]
    return lines + markdown.table(
        ["dataset", "version", "run", "last step read", "ranks", "world size", "seed", "last receipt"],
        [
            [t["dataset"], t["version"], t["run_id"], t["last_step"] if t["last_step"] is not None else "-",
             len(t["ranks"]), t["world_size"], t["seed"], t.get("at") or "-"]
            for t in audit["compliance"].get("training_runs", [])
        ],
    )  # fmt: skip


def markdown_revocations(audit: dict[str, Any]) -> list[str]:
    lines = ["## Revocations", ""]
    rows = []
    for r in audit["compliance"]["revocations"]:
        what = (
            f"source {r['source']}, licence {r['license']}"
            if r.get("source")
            else f"{len(r['doc_hashes'])} hash(es)"
        )
        verified = {True: "yes", False: "NO" if r["documents"] else "matched nothing", None: "incomplete"}[
            r["verified"]
        ]
        rows.append([r["id"], what, r["reason"], r["documents"], r["dataset_versions"], len(r["marked_revoked"]),
                     verified, r["report"] or "-"])  # fmt: skip
    return lines + markdown.table(
        [
            "id",
            "what",
            "why",
            "documents",
            "versions that held them",
            "marked revoked",
            "verified gone",
            "report",
        ],
        rows,
    )
