"""The revocation report: the blast radius in JSON (for machines) and Markdown (for a legal ticket).

``build_report`` puts together what ``blast_radius`` found (releases, shards, Iceberg snapshots, Lance
versions), the runs that produced them (passed in: they come from the Dagster instance), the newest releases
that no longer hold the documents and the byte-level verification of their shards, and the training runs
that read a version holding them (their read receipts: how far each got); ``apply_marks`` marks
every older release that held them as revoked. Both are written under ``compliance/revocations/<id>/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fm_assets.compliance import blast_radius, paths, training_runs
from fm_assets.compliance.revocations import Revocation
from fm_assets.engine import markdown
from fm_assets.engine.store import ObjectStore

if TYPE_CHECKING:  # pyiceberg is imported where a catalog is read, not with every `fm` command
    from pyiceberg.catalog import Catalog


def build_report(
    store: ObjectStore,
    revocation: Revocation,
    affected: blast_radius.AffectedDocuments,
    *,
    dataset: str,
    catalog: Catalog | None,
    lance_cloud_uri: str | None,
    lance_options: dict[str, str] | None = None,
    runs: list[dict[str, Any]] | None = None,
    rerun: dict[str, Any] | None = None,
) -> dict[str, Any]:
    releases = blast_radius.locate_in_releases(store, affected)
    held = {(r["dataset"], r["version"]) for r in releases}
    verification = blast_radius.verify_latest(store, dataset, affected)
    new_versions = [v for v in verification if (v["dataset"], v["version"]) not in held]
    shards = sorted({path for r in releases for path in r["shards"]})
    iceberg = blast_radius.locate_in_iceberg(catalog, affected) if catalog is not None else []
    lance = blast_radius.locate_in_lance(lance_cloud_uri, affected, lance_options) if lance_cloud_uri else []
    return {
        "revocation": revocation.to_json(),
        "affected": {"documents": len(affected.doc_ids), "batches": affected.batches},
        "rerun": rerun or {},
        "dataset_versions": releases,
        "shards": shards,
        "iceberg_snapshots": iceberg,
        "lance_versions": lance,
        "runs": runs or [],
        "training_runs": training_runs.runs_reading(store, [(r["dataset"], r["version"]) for r in releases]),
        "new_versions": [{"dataset": v["dataset"], "version": v["version"]} for v in new_versions],
        "verification": verification,
        "verified": bool(affected.doc_ids) and bool(verification) and all(v["ok"] for v in verification),
        "still_present": {
            "iceberg_current": [s for s in iceberg if s["current"]],
            "lance_current": [v for v in lance if v["current"]],
        },
    }


def apply_marks(store: ObjectStore, revocation: Revocation, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Mark every release version that held revoked documents; superseded by the newest clean version of
    the same dataset, when there is one. Idempotent: versions this revocation marked in an interrupted earlier
    attempt are listed too; a version another revocation marked first keeps that mark and is not listed."""
    clean = {v["dataset"]: v["version"] for v in report["new_versions"]}
    marked = []
    for entry in report["dataset_versions"]:
        blast_radius.mark_revoked(
            store, entry["dataset"], entry["version"], revocation, clean.get(entry["dataset"])
        )
        mark = blast_radius.revocation_mark(store, entry["dataset"], entry["version"]) or {}
        if mark.get("revocation_id") == revocation.id:
            marked.append(
                {
                    "dataset": entry["dataset"],
                    "version": entry["version"],
                    "superseded_by": mark.get("superseded_by"),
                }
            )
    report["marked_revoked"] = marked
    return marked


def write_report(store: ObjectStore, report: dict[str, Any]) -> tuple[str, str]:
    """Write report.md, then report.json; returns their store-relative paths."""
    revocation_id = report["revocation"]["id"]
    json_rel, md_rel = (
        paths.revocation_report(revocation_id, "json"),
        paths.revocation_report(revocation_id, "md"),
    )
    store.write_bytes(md_rel, render_markdown(report).encode())
    store.write_json(json_rel, report)  # last: its presence says the revocation is complete (``pending``)
    return json_rel, md_rel


def render_markdown(report: dict[str, Any]) -> str:
    r = report["revocation"]
    what = (
        f"source {markdown.escape(r['source'])}, licence {markdown.escape(r['license'])}"
        if r.get("source")
        else (f"{len(r['doc_hashes'])} document hash(es)")
    )
    if not report["affected"]["documents"]:
        verdict = (
            "NOTHING MATCHED: no landed document is covered (recorded with --allow-empty; it applies to "
            "batches landed later)"
        )
    elif report["verified"]:
        verdict = "VERIFIED: none of the revoked documents is in the newest releases"
    else:
        verdict = "NOT VERIFIED: revoked documents are still present (see Verification)"
    lines = [
        f"# Revocation {r['id']}",
        "",
        f"- **What**: {what}",
        f"- **Why**: {markdown.escape(r['reason'])}",
        f"- **Requested by**: {markdown.escape(r.get('requested_by') or 'not given')}",
        f"- **Recorded at**: {r['at']}",
        f"- **Documents affected**: {report['affected']['documents']:,} in {len(report['affected']['batches'])} batch(es)",
        f"- **Result**: {verdict}",
        "",
        "## Dataset versions that contained them",
        "",
        *markdown.table(
            [
                "dataset",
                "version",
                "namespace",
                "documents",
                "shards",
                "latest when found",
            ],
            [
                [
                    v["dataset"],
                    v["version"],
                    v["namespace"],
                    v["documents"],
                    len(v["shards"]),
                    v["latest"],
                ]
                for v in report["dataset_versions"]
            ],
        ),
        "## Versions marked revoked",
        "",
        *markdown.table(
            ["dataset", "version", "superseded by"],
            [
                [m["dataset"], m["version"], m["superseded_by"] or "-"]
                for m in report.get("marked_revoked", [])
            ],
        ),
        "## Shards that contained them",
        "",
        *markdown.table(["shard"], [[s] for s in report["shards"]]),
        "## Media samples that contained them (as released: a video's clips `<video id>@cNNN`)",
        "",
        *markdown.table(
            ["dataset", "version", "sample"],
            [
                [v["dataset"], v["version"], sample]
                for v in report["dataset_versions"]
                for sample in v.get("samples", [])
            ],
        ),
        "## Iceberg snapshots that contained them",
        "",
        *markdown.table(
            ["table", "snapshot", "committed", "documents", "current"],
            [
                [
                    s["table"],
                    s["snapshot_id"],
                    s["committed_at"],
                    s["documents"],
                    s["current"],
                ]
                for s in report["iceberg_snapshots"]
            ],
        ),
        "## Lance versions that contained them",
        "",
        *markdown.table(
            ["dataset", "version", "documents", "current"],
            [[v["uri"], v["version"], v["documents"], v["current"]] for v in report["lance_versions"]],
        ),
        "## Runs that produced them",
        "",
        *markdown.table(
            ["run id", "job", "asset", "partition", "at"],
            [
                [
                    x["run_id"],
                    x.get("job", ""),
                    x["asset"],
                    x.get("partition") or "-",
                    x["at"],
                ]
                for x in report["runs"]
            ],
        ),
        "## Training runs that read them (read receipts)",
        "",
        *markdown.table(
            [
                "run",
                "dataset",
                "version",
                "last step read",
                "epoch",
                "ranks",
                "world size",
                "seed",
                "last receipt",
            ],
            [
                [
                    t["run_id"],
                    t["dataset"],
                    t["version"],
                    t["last_step"] if t["last_step"] is not None else "-",
                    t.get("epoch", "-"),
                    len(t["ranks"]),
                    t["world_size"],
                    t["seed"],
                    t.get("at") or "-",
                ]
                for t in report.get("training_runs", [])
            ],
        ),
        "## New versions without them",
        "",
        *markdown.table(
            ["dataset", "version"],
            [[v["dataset"], v["version"]] for v in report["new_versions"]],
        ),
        "## Verification (the bytes of every shard of the newest releases)",
        "",
        *markdown.table(
            ["dataset", "version", "shards", "samples", "revoked documents found"],
            [
                [
                    v["dataset"],
                    v["version"],
                    v["shards_scanned"],
                    v["samples_scanned"],
                    v["revoked_documents_found"],
                ]
                for v in report["verification"]
            ],
        ),
    ]
    return "\n".join(lines) + "\n"


def is_complete(store: ObjectStore, revocation_id: str) -> bool:
    """Whether the revocation's report was written (the last step of ``fm revoke``)."""
    return store.exists(paths.revocation_report(revocation_id, "json"))
