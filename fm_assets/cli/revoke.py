"""``fm revoke``: record a revocation, re-run what it affects, and write its blast-radius report.

Crash-safe by construction: the record is the intent (its id ends with a key derived from the request, so
running the same ``fm revoke`` again resumes it); re-running the batches is cached work, marking releases is
idempotent, and ``report.json`` is written last. A kill -9 at any point leaves either nothing or a recorded
revocation without a report, which the next ``fm revoke`` of the same request or the next ``fm run`` completes
(``complete_pending``). Progress goes to stderr; the outcome (what held the documents, the report, the
verdict) to stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from rich.console import Console

from fm_assets.compliance import blast_radius, revocation_report
from fm_assets.compliance.namespaces import require_processable
from fm_assets.compliance.revocations import (
    Revocation,
    RevocationError,
    is_recorded,
    list_revocations,
    prepare_revocation,
    write_revocation,
)
from fm_assets.engine.refs import read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import Settings

RUN_LOOKBACK = 10_000  # materialization records read per asset when naming the runs


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "revoke",
        help="revoke a (source, licence) pair or document hashes: record, re-run, blast-radius report",
    )
    p.add_argument("--source", help="revoke every document of this source ('*': any)")
    p.add_argument("--license", help="revoke every document under this licence ('*': any)")
    p.add_argument(
        "--doc-hash",
        action="append",
        default=[],
        help="sha256 of a document's text, or of a media sample's raw bytes (repeatable)",
    )
    p.add_argument(
        "--reason",
        help="why (required; goes into the report and the revoked manifests)",
    )
    p.add_argument("--requested-by", help="who asked for it (ticket, person)")
    p.add_argument(
        "--no-run",
        action="store_true",
        help="record and report only; re-run later with `fm run`",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="record it even if it matches no landed document (it then applies to batches landed later)",
    )
    return p


SHARD_ASSETS = ("shard", "media_shard")
RELEASE_ASSETS = ("dataset_release", "media_dataset_release")


def producing_runs(
    settings: Settings,
    store: ObjectStore,
    shard_prefixes: set[str],
    release_versions: set[str],
) -> list[dict[str, Any]]:
    """The Dagster runs that wrote the shard outputs (text and media) and the release versions that held
    revoked documents."""
    from dagster import AssetKey, AssetRecordsFilter

    from fm_assets.cli.runner import dagster_instance

    instance = dagster_instance(settings)
    store_versions: dict[str, str] = {}
    batches = set()
    for prefix in shard_prefixes:
        success = read_success_at(store, prefix)
        store_versions[success.data_version] = prefix
        batches.add(success.batch)
    runs = []
    for asset in SHARD_ASSETS if batches else ():
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=sorted(batches)),
            limit=RUN_LOOKBACK,
        ).records
        for record in records:
            materialization = record.asset_materialization
            version = (materialization.tags or {}).get("dagster/data_version") if materialization else None
            if version in store_versions:
                runs.append(_run_row(instance, record, asset, store_versions[version]))
    for asset in RELEASE_ASSETS:
        for record in instance.fetch_materializations(AssetKey(asset), limit=RUN_LOOKBACK).records:
            metadata = record.asset_materialization.metadata if record.asset_materialization else {}
            # text names its manifests' paths, media lists what it released (dataset, version, folder)
            written = json.dumps([getattr(value, "value", value) for value in metadata.values()], default=str)
            if any(f"/{version}/" in written or f'"{version}"' in written for version in release_versions):
                runs.append(_run_row(instance, record, asset, None))
    return sorted(runs, key=lambda row: row["at"])


def _run_row(instance: Any, record: Any, asset: str, output: str | None) -> dict[str, Any]:
    run = instance.get_run_by_id(record.run_id)
    return {
        "run_id": record.run_id,
        "job": run.job_name if run else "",
        "asset": asset,
        "partition": record.partition_key,
        "output": output,
        "at": dt.datetime.fromtimestamp(record.timestamp, dt.timezone.utc).isoformat(timespec="seconds"),
    }


def run(
    args: argparse.Namespace, settings: Settings, store: ObjectStore, console: Console, out: Console
) -> int:
    from fm_assets.cli.runner import run_batches

    try:
        revocation = prepare_revocation(
            store,
            reason=args.reason,
            requested_by=args.requested_by,
            source=args.source,
            license_id=args.license,
            doc_hashes=args.doc_hash,
        )
    except RevocationError as exc:
        console.print(f"[red]fm revoke: {exc}[/red]", highlight=False)
        return 2
    resumed = is_recorded(store, revocation)
    affected = blast_radius.affected_documents(store, revocation)
    if not resumed and not affected.doc_ids and not blast_radius.matching_batches(store, revocation):
        if not args.allow_empty:
            console.print(f"[red]fm revoke: {_matches_nothing(store, revocation)}[/red]", highlight=False)
            return 2
        console.print(f"[yellow]{revocation.describe()} matches no landed document (--allow-empty)[/yellow]")
    write_revocation(store, revocation)
    verb = "resuming revocation" if resumed else "recorded revocation"
    console.print(f"{verb} {revocation.id} ({revocation.describe()})", highlight=False)
    console.print(f"{len(affected.doc_ids):,} document(s) affected in {len(affected.batches)} batch(es)")
    rerun: dict[str, Any] = {"ran": False}
    if not args.no_run and affected.batches:
        processable = [b for b in affected.batches if _processable(store, b)]
        failures = run_batches(settings, processable, release=True, console=console)
        rerun = {"ran": True, "batches": processable, "failures": failures}
        for batch, message in failures.items():
            console.print(f"[red]re-run of {batch} failed: {message}[/red]", highlight=False)
    report, md_rel = finish(settings, store, revocation, affected, rerun)
    out.print(
        f"revocation {revocation.id}: {report['affected']['documents']:,} document(s); "
        f"{len(report['dataset_versions'])} dataset version(s), {len(report['shards'])} shard(s), "
        f"{len(report['iceberg_snapshots'])} Iceberg snapshot(s), {len(report['lance_versions'])} Lance version(s) "
        f"and {len(report['runs'])} run(s) held them; {len(report.get('marked_revoked', []))} version(s) marked "
        "revoked",
        highlight=False,
    )
    for t in report["training_runs"]:
        out.print(
            f"training run {t['run_id']} read {t['dataset']} {t['version']} up to step {t['last_step']} "
            f"(world size {t['world_size']}, seed {t['seed']})",
            highlight=False,
        )
    out.print(f"report: {store.uri(md_rel)}", highlight=False)
    if not report["affected"]["documents"]:
        why = (
            "recorded with --allow-empty"
            if args.allow_empty
            else "its batches are not processed yet: `fm run`"
        )
        out.print(f"nothing matched: no processed document is covered yet ({why})", highlight=False)
        return 0
    if args.no_run:
        out.print("not re-run (--no-run): `fm run` removes the documents from the next releases")
        return 0
    if not report["verified"]:
        out.print("[red]NOT VERIFIED: revoked documents are still in the newest releases[/red]")
        return 1
    out.print("[green]verified: no revoked document in the shards of the newest releases[/green]")
    return 0


def _matches_nothing(store: ObjectStore, revocation: Revocation) -> str:
    """Why an empty revocation is refused, with what was landed (the likely typo) and the way to force it."""
    if revocation.by_pair:
        pairs = blast_radius.landed_pairs(store)
        shown = ", ".join(f"{source} ({licence})" for source, licence in pairs[:12]) or "none"
        more = f" and {len(pairs) - 12} more" if len(pairs) > 12 else ""
        landed = f"; landed sources (licence): {shown}{more}"
    else:
        landed = (
            " (hashes are the sha256 of a document's text after dedup, or of a media sample's raw bytes; run `fm run`"
            " first if it is new)"
        )
    return (
        f"{revocation.describe()} matches no landed document{landed}. Nothing recorded: check the spelling, or "
        "pass --allow-empty to record it for batches landed later"
    )


def finish(
    settings: Settings,
    store: ObjectStore,
    revocation: Revocation,
    affected: blast_radius.AffectedDocuments,
    rerun: dict[str, Any],
) -> tuple[dict[str, Any], str]:
    """Build the blast-radius report, mark the versions that held the documents, write the report last."""
    from fm_assets.defs.resources import build_resources

    resources = build_resources(settings)
    lance = resources["lance"]
    releases = blast_radius.locate_in_releases(store, affected)
    report = revocation_report.build_report(
        store,
        revocation,
        affected,
        dataset=settings.dataset_name,
        catalog=resources["iceberg"].catalog(),
        lance_cloud_uri=lance.documents(),
        lance_options=lance.storage_options() or None,
        runs=producing_runs(
            settings,
            store,
            {path.rsplit("/", 1)[0] for r in releases for path in r["shards"]},
            {r["version"] for r in releases},
        ),
        rerun=rerun,
    )
    revocation_report.apply_marks(store, revocation, report)
    _, md_rel = revocation_report.write_report(store, report)
    return report, md_rel


def complete_pending(settings: Settings, store: ObjectStore, console: Console) -> list[str]:
    """Finish every recorded revocation whose report is missing (an ``fm revoke`` killed part-way), after a
    run that re-ran the batches and wrote the releases; returns their ids."""
    done = []
    for revocation in list_revocations(store):
        if revocation_report.is_complete(store, revocation.id):
            continue
        console.print(f"completing revocation {revocation.id} left unfinished by an interrupted `fm revoke`")
        affected = blast_radius.affected_documents(store, revocation)
        finish(settings, store, revocation, affected, {"ran": True, "by": "fm run"})
        done.append(revocation.id)
    return done


def _processable(store: ObjectStore, batch: str) -> bool:
    from fm_assets.compliance.namespaces import QuarantinedBatchError

    try:
        require_processable(store, batch)
    except QuarantinedBatchError:
        return False
    return True
