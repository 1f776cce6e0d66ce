"""The ``fm`` command line: sample-data, land, run, report, rejects, audit, verify, repair and demo."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from fm_assets.cli import cost
from fm_assets.cli.pipes import err as console
from fm_assets.cli.pipes import out, reader_left
from fm_assets.cli.tables import add_id_column, print_summary
from fm_assets.engine.identifiers import InvalidIdentifierError, check_batch_id, check_source_name
from fm_assets.engine.locks import RootBusyError, batch_run_locks
from fm_assets.engine.storage_errors import RedactingFilter, one_line_error
from fm_assets.engine.store import ObjectStore, StorageUnavailableError, open_store
from fm_assets.settings import Settings, load_settings

DEMO_LICENSES = {"python-stdlib": "PSF-2.0"}
OFFLINE_COMMANDS = frozenset({"sample-data"})  # commands that do not touch the store


def _store(settings: Settings) -> ObjectStore:
    return open_store(settings.root, settings.s3_endpoint_url, settings.s3_region)


def cmd_sample_data(args: argparse.Namespace, settings: Settings) -> int:
    if args.modality in ("text", "all"):
        from fm_assets.sample_data import fetch_sample_data

        summary = fetch_sample_data(
            Path(args.dest), max_docs=args.max_docs, source=args.source, progress=settings.progress
        )
        table = Table(title=f"sample data ({summary['source']})")
        for column in ("package", "docs", "bytes", "licence"):
            table.add_column(column)
        for name, info in summary["packages"].items():
            table.add_row(name, str(info["docs"]), f"{info['bytes']:,}", info.get("license", "?"))
        out.print(table)
    if args.modality in ("image", "audio", "video", "all"):
        from fm_assets.sample_data.media import MEDIA_MODALITIES, fetch_media_sample_data

        modalities = MEDIA_MODALITIES if args.modality == "all" else (args.modality,)
        media = fetch_media_sample_data(Path(args.dest), modalities=modalities, max_samples=args.max_samples)
        table = Table(title="media sample data (Debian packages)")
        for column in ("package", "modality", "samples", "media bytes", "licence", "folder"):
            table.add_column(column)
        for name, info in media["packages"].items():
            table.add_row(
                name,
                info["modality"],
                str(info["samples"]),
                f"{info['media_bytes']:,}",
                info["license"],
                info["folder"],
            )
        out.print(table)
        if not media["total_samples"]:
            console.print(f"[red]fm sample-data: no media samples ({'; '.join(media['errors'])})[/red]")
            return 1
    return 0


def cmd_land(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.engine.landing import LandingError, land_batch

    try:
        manifest = land_batch(
            _store(settings), args.src, source=args.source, license_id=args.license, namespace=args.namespace
        )
    except LandingError as exc:
        console.print(f"[red]fm land: {exc}[/red]")
        return 2
    console.print(f"landed {len(manifest.files)} file(s) as batch {manifest.batch}")
    if manifest.skipped:
        reasons = Counter(entry["reason"] for entry in manifest.skipped)
        console.print(
            f"[yellow]not landed: {len(manifest.skipped)} path(s) "
            f"({', '.join(f'{n} {reason}' for reason, n in sorted(reasons.items()))}); listed in the batch's "
            "_batch.json under 'skipped'[/yellow]"
        )
        for entry in manifest.skipped[:20]:
            target = f" -> {entry['target']}" if "target" in entry else ""
            console.print(f"  {entry['path']}{target}: {entry['reason']}", highlight=False)
        if len(manifest.skipped) > 20:
            console.print(f"  ... and {len(manifest.skipped) - 20} more", highlight=False)
    out.print(manifest.batch, highlight=False)
    return 0


@contextlib.contextmanager
def exclusive_batches(settings: Settings, batches: list[str], *, wait: bool) -> Iterator[None]:
    """Hold the run locks of ``batches`` (another `fm run` or `fm repair` of one of them waits or stops) and
    clear the scratch folders of killed runs."""
    store = _store(settings)
    with batch_run_locks(store, batches, wait=wait):
        removed = store.clean_stale_staging()
        if removed:
            console.print(f"removed {removed} scratch folder(s) left by killed runs")
        yield


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli.head_start import warm_unit_workers
    from fm_assets.engine.landing import list_complete_batches

    store = _store(settings)
    landed = list_complete_batches(store)
    if not landed:
        console.print(
            f"[red]fm run: no complete landing batch under {settings.root}; create one with `fm land`[/red]"
        )
        return 2
    if args.verify:
        settings = settings.model_copy(update={"verify_cache_hits": "full"})
    unknown = [batch for batch in args.batches if batch not in landed]
    if unknown:  # said before any lock file is taken
        console.print(
            f"[red]fm run: not complete landing batches: {', '.join(unknown)}; see `fm report` or "
            f"`ls {_store(settings).uri('landing')}`[/red]",
            highlight=False,
        )
        return 2
    wanted = _processable(settings, args.batches, landed)
    if wanted is None:
        return 2
    if not wanted:
        console.print("[red]fm run: no batch to process: every landed batch awaits quarantine review[/red]")
        return 2
    # before Dagster is imported: the workers' fork server imports the stages while the run imports Dagster
    warm_unit_workers(settings, store, wanted)
    from fm_assets.cli.runner import UnknownBatchError, run_batches
    from fm_assets.datasets.release import latest_versions

    before = latest_versions(_store(settings), settings.dataset_name)
    try:
        with exclusive_batches(settings, wanted, wait=args.wait):
            failures = run_batches(settings, wanted, release=not args.no_release, console=console)
    except (UnknownBatchError, RootBusyError) as exc:
        console.print(f"[red]fm run: {exc}[/red]")
        return 2 if isinstance(exc, UnknownBatchError) else 3
    if args.json:
        from fm_assets.reports.report import build_report

        out.print_json(json.dumps(build_report(_store(settings), args.batches or None)))
    else:
        print_summary(out, _store(settings), args.batches or None)
    for batch, message in failures.items():
        console.print(f"[red]batch {batch} failed: {message}[/red]", highlight=False)
    held_back = []
    if not args.no_release and "<release>" not in failures and set(wanted) - set(failures):
        _report_releases(settings, before, out if not args.json else console)
        held_back = _report_held_back(settings)
        from fm_assets.cli.revoke import complete_pending

        complete_pending(settings, _store(settings), console)  # an `fm revoke` killed part-way
    from fm_assets.datasets.release import not_run_yet

    # a batch held back for a reason (a failure, a blocking check, the licence policy) is a non-zero exit, as
    # documented; one that another run is still processing (or nobody ran yet) is only named
    blocking = [h for h in held_back if h["batch"] in wanted or not not_run_yet(h["reason"])]
    return 1 if failures or blocking else 0


def _report_releases(settings: Settings, before: dict[str, str], where: Console) -> None:
    """One line per dataset the release wrote (or found current): name, version and manifest, to copy into a
    training config."""
    from fm_assets.datasets.release import latest_versions
    from fm_assets.engine import layout

    store = _store(settings)
    for dataset, version in latest_versions(store, settings.dataset_name).items():
        what = "released" if before.get(dataset) != version else "unchanged"
        manifest = store.uri(layout.dataset_manifest(dataset, version))
        where.print(f"{what} {dataset} version {version}: {manifest}", markup=False, highlight=False)


def _processable(settings: Settings, named: list[str], landed: list[str]) -> list[str] | None:
    """The batches `fm run` processes: unreviewed or rejected quarantine batches never are. A named one is
    refused (None, after saying why); without names they are skipped with a note."""
    from fm_assets.compliance.namespaces import (
        QuarantinedBatchError,
        require_processable,
    )
    from fm_assets.engine.landing import LandingError

    store = _store(settings)
    wanted = []
    for batch in named or landed:
        try:
            require_processable(store, batch)
        except QuarantinedBatchError as exc:
            if named:
                console.print(f"[red]fm run: {exc}[/red]", highlight=False)
                return None
            console.print(f"[yellow]skipped: {exc}[/yellow]", highlight=False)
            continue
        except LandingError:
            pass  # not a complete batch: run_batches names it
        wanted.append(batch)
    return wanted


def _report_held_back(settings: Settings) -> list[dict[str, str]]:
    """Name the batches the release just written left out, and why (they are in its card's 'held_back');
    returns them."""
    from fm_assets.datasets.release import latest_held_back

    held_back = latest_held_back(_store(settings), settings.dataset_name)
    if held_back:
        console.print(
            f"[yellow]releases of {settings.dataset_name} written without {len(held_back)} batch(es) "
            "(their cards list them under 'held_back'):[/yellow]"
        )
    for entry in held_back:
        console.print(f"[yellow]  held back {entry['batch']}: {entry['reason']}[/yellow]", highlight=False)
    return held_back


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.reports.report import NoSuchBatchOrStage, build_report, check_batches

    try:  # a batch named that is not landed is a typo, not an empty report
        check_batches(_store(settings), args.batches or [])
    except NoSuchBatchOrStage as exc:
        console.print(f"fm report: {exc}", style="red", markup=False, highlight=False)
        return 2
    if args.cost:
        from fm_assets.cli.cost import print_cost

        return print_cost(args, _store(settings), settings.cost_teams, out, as_json=args.json)
    if args.json:
        out.print_json(json.dumps(build_report(_store(settings), args.batches or None)))
    else:
        print_summary(out, _store(settings), args.batches or None)
    return 0


def cmd_rejects(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.reports.report import NoSuchBatchOrStage, NotRunError, iter_rejects, rejects_scope

    store = _store(settings)
    try:  # a typo (exit 2) or a batch not run (exit 1) is not a clean batch (exit 0, "0 rejected record(s)")
        stages = rejects_scope(store, args.batch, args.stage)
    except (NoSuchBatchOrStage, NotRunError) as exc:
        console.print(f"fm rejects: {exc}", style="red", markup=False, highlight=False)
        return 2 if isinstance(exc, NoSuchBatchOrStage) else 1
    count = 0
    for row in iter_rejects(store, args.batch, args.stage):
        if not args.with_text:
            row["text"] = (row["text"] or "")[:200]
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    console.print(
        f"{count} rejected record(s) in {args.batch} ({len(stages)} stage output(s) read)",
        markup=False,
        highlight=False,
    )
    return 0


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.reports.audit import build_audit

    audit = build_audit(_store(settings), args.dataset, releases_of=settings.dataset_name)
    if args.json or args.format == "json":
        out.print_json(json.dumps(audit, default=str))
        return 0
    if args.format == "md":
        return _write_markdown_audit(audit, args.output)
    table = Table(title="licences: where they ended up")
    for column in ("licence", "docs landed", "docs in shards", "tokens in shards"):
        table.add_column(column)
    for licence, row in sorted(audit["licences"].items()):
        table.add_row(
            licence, f"{row['documents_landed']:,}", f"{row['documents_in_shards']:,}", f"{row['tokens']:,}"
        )
    out.print(table)
    table = Table(title="per batch evidence")
    add_id_column(table)
    for column in (
        "source",
        "licence",
        "namespace",
        "PII-flagged docs",
        "eval leaks removed",
        "checks",
    ):
        table.add_column(column, overflow="fold")
    for row in audit["batches"]:
        checks = [c for stage in row["stages"].values() for c in stage["checks"].values()]
        passed = sum(1 for c in checks if c["passed"])
        table.add_row(
            row["batch"],
            row["source"],
            row["license"],
            row["namespace"],
            str(row["pii_flagged_documents"]),
            str(row["eval_contamination_removed"]),
            f"{passed}/{len(checks)} passed",
        )
    out.print(table)
    media_rows = [row for row in audit["batches"] if row.get("media_samples_landed")]
    if media_rows:
        table = Table(title="media: samples and checks per batch")
        add_id_column(table)
        for column in ("samples landed", "in shards", "checks (value)"):
            table.add_column(column, overflow="fold")
        for row in media_rows:
            checks = ", ".join(
                f"{name}: {'ok' if c['passed'] else 'FAILED'} ({next(v for k, v in c.items() if k != 'passed')})"
                for name, c in row["media_checks"].items()
            )
            table.add_row(
                row["batch"],
                f"{row['media_samples_landed']:,}",
                f"{row['media_samples_in_shards']:,}",
                checks,
            )
        out.print(table)
    # issue 19: blocking failures (held back) apart from warnings
    if audit["failed_blocking_checks"]:
        out.print(
            f"[red]failed blocking checks (held back): {', '.join(audit['failed_blocking_checks'])}[/red]",
            highlight=False,
        )
    if audit["failed_warning_checks"]:
        out.print(
            f"[yellow]failed warning-level checks: {', '.join(audit['failed_warning_checks'])}[/yellow]",
            highlight=False,
        )
    for finding in audit["integrity"]["findings"]:
        out.print(f"[red]damaged since its checks ran: {finding['path']} {finding['problem']}[/red]")
    _print_compliance(audit["compliance"])
    return 0


def _print_compliance(compliance: dict) -> None:
    """One line per release, held-back batch, unreviewed quarantine batch and revocation (details: --format md)."""
    for release in compliance["releases"]:
        out.print(
            f"release {release['dataset']} ({release['namespace']}) {release['version']}: "
            f"{len(release['batches'])} batch(es), {len(release['held_back'])} held back",
            highlight=False,
        )
        for held in release["held_back"]:
            out.print(f"  held back {held['batch']}: {held['reason']}", highlight=False)
    for row in compliance["quarantine"]:
        if row["status"] == "awaiting_review":
            out.print(
                f"quarantine {row['batch']}: awaiting review (fm quarantine promote/reject)", highlight=False
            )
    for revocation in compliance["revocations"]:
        verified = {
            True: "verified gone",
            False: "NOT verified gone" if revocation["documents"] else "matched nothing",
            None: "incomplete: `fm run` or the same `fm revoke` finishes it",
        }[revocation["verified"]]
        out.print(f"revocation {revocation['id']}: {revocation['reason']} ({verified})", highlight=False)
    for run in compliance.get("training_runs", []):
        out.print(
            f"training run {run['run_id']} read {run['dataset']} {run['version']} up to step {run['last_step']}",
            highlight=False,
        )


def cmd_quarantine(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli import quarantine

    return quarantine.run(args, _store(settings), console, out)


def cmd_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli import revoke

    return revoke.run(args, settings, _store(settings), console, out)


def cmd_trace(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli import trace

    return trace.run(args, _store(settings), console, out)


def _write_markdown_audit(audit: dict, output: str | None) -> int:
    from fm_assets.reports.audit import render_markdown

    text = render_markdown(audit)
    if output:
        Path(output).write_text(text)
        out.print(f"audit written to {output}", highlight=False)
    else:
        sys.stdout.write(text)
    return 0


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.reports.verify import verify_root

    report = verify_root(_store(settings), dataset=args.dataset, quick=args.quick)
    if args.json:
        out.print_json(json.dumps(report.to_json()))
    else:
        out.print(
            f"checked {report.outputs_checked} stage outputs ({report.files_checked:,} files, "
            f"{report.bytes_checked / 1e6:,.1f} MB{', sizes only' if args.quick else ', sha256'}), "
            f"{report.cas_checked:,} CAS objects, {report.releases_checked} releases"
        )
        for finding in report.findings:
            out.print(
                f"[red]{finding.kind}: {finding.path} {finding.problem}[/red]\n  repair: {finding.repair}"
            )
        if report.ok:
            out.print("[green]no damage found[/green]")
    return 0 if report.ok else 1


def cmd_repair(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli.repair import plan_and_reset, repair_cas, stages_to_check
    from fm_assets.cli.runner import run_batches

    store = _store(settings)
    if args.cas:
        restored = repair_cas(store)
        out.print(f"restored {len(restored)} CAS object(s) from their landed copies")
        if not args.batch:
            return 0
    if not args.batch:
        console.print("[red]fm repair: name a BATCH (and optionally --stage), or pass --cas[/red]")
        return 2
    from fm_assets.engine.landing import list_complete_batches

    if args.batch not in list_complete_batches(store):  # said before the batch's run lock is taken
        console.print(f"[red]fm repair: {args.batch} is not a complete landing batch[/red]", highlight=False)
        return 2
    try:
        with exclusive_batches(settings, [args.batch], wait=False):
            plan = plan_and_reset(store, args.batch, stages_to_check(args.stage))
            if not plan.needed:
                out.print(f"no damage in {args.batch}'s outputs of {args.stage or 'any stage'}")
                return 0
            for stage, paths in plan.damaged.items():
                units = ", ".join(plan.units[stage])
                console.print(f"{stage}: {len(paths)} damaged file(s); recomputing units {units}")
            failures = run_batches(settings, [args.batch], release=not args.no_release, console=console)
    except (ValueError, RootBusyError) as exc:
        console.print(f"[red]fm repair: {exc}[/red]")
        return 2
    if failures:
        for batch, message in failures.items():
            console.print(f"[red]repair of {batch} failed: {message}[/red]")
        return 1
    from fm_assets.engine.refs import read_success

    for stage, before in plan.data_versions.items():
        after = read_success(store, stage, args.batch).data_version
        same = (
            "unchanged" if after == before else f"CHANGED ({before[:12]} -> {after[:12]}: not a pure stage?)"
        )
        out.print(f"{stage}[{args.batch}] repaired; data version {same}")
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli.demo import run_demo

    media_samples = 0 if args.no_media else args.media_samples
    return run_demo(settings, max_docs=args.max_docs, console=console, out=out, media_samples=media_samples)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fm", description="FM data platform: raw text -> training shards.")
    parser.add_argument(
        "--root", help="storage root (local folder or s3://bucket/prefix); default $FM_ROOT or ./fm_data"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "sample-data",
        help="fetch real public data from Debian packages: text as JSONL, image-, audio- and video-text as key folders",
    )
    p.add_argument("dest")
    p.add_argument("--modality", choices=("text", "image", "audio", "video", "all"), default="text")
    p.add_argument("--max-docs", type=int, default=None, help="cap text documents per package")
    p.add_argument("--max-samples", type=int, default=None, help="cap image/audio samples per package")
    p.add_argument("--source", choices=("auto", "apt", "python"), default="auto", help="text only")
    p.set_defaults(func=cmd_sample_data)

    p = sub.add_parser("land", help="create an immutable landing batch from a file or folder")
    p.add_argument("src")
    p.add_argument("--source", required=True, help="short source name, e.g. debian-handbook")
    p.add_argument("--license", required=False, help="SPDX licence identifier or expression")
    p.add_argument("--namespace", default="cloud", help="cloud, on_device or quarantine")
    p.set_defaults(func=cmd_land)

    p = sub.add_parser("run", help="materialize every stage for the given (default: all) batches via Dagster")
    p.add_argument("batches", nargs="*")
    p.add_argument("--no-release", action="store_true", help="skip assembling the dataset version")
    p.add_argument("--verify", action="store_true", help="cache hits re-hash every file they reuse (sha256)")
    p.add_argument("--wait", action="store_true", help="if another run holds the root, wait for it")
    p.add_argument("--json", action="store_true", help="the per-stage summary as JSON on stdout")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "report", help="records in/out/rejected, reasons, tokens, cache hits per batch and stage"
    )
    p.add_argument("batches", nargs="*")
    p.add_argument("--json", action="store_true")
    cost.add_arguments(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("rejects", help="rejected records of a batch as JSONL")
    p.add_argument("batch")
    p.add_argument("--stage")
    p.add_argument("--with-text", action="store_true", help="full text instead of a 200-char prefix")
    p.set_defaults(func=cmd_rejects)

    p = sub.add_parser("audit", help="compliance report: licences, PII flags, eval leakage, check outcomes")
    p.add_argument("--dataset", help="limit to the batches of this dataset's latest version (e.g. fm-demo)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--format",
        choices=("table", "json", "md"),
        default="table",
        help="md: a report for a ticket",
    )
    p.add_argument("--output", "-o", help="with --format md: write the report to this file")
    p.set_defaults(func=cmd_audit)

    from fm_assets.cli import quarantine, revoke

    quarantine.add_parser(sub).set_defaults(func=cmd_quarantine)
    revoke.add_parser(sub).set_defaults(func=cmd_revoke)

    from fm_assets.cli import trace

    trace.add_parser(sub).set_defaults(func=cmd_trace)

    from fm_assets.cli import card

    card.add_parser(sub)
    sub.choices["card"].set_defaults(
        func=lambda args, settings: card.run(args, _store(settings), console, out)
    )

    from fm_assets.cli import quality_model

    quality_model.add_parser(sub)
    sub.choices["quality-model"].set_defaults(
        func=lambda args, settings: quality_model.run(args, _store(settings), console, out)
    )

    p = sub.add_parser(
        "verify",
        help="check every committed byte (stage outputs, CAS, landing, releases)",
    )
    p.add_argument("--dataset", help="only this dataset's latest release and the batches it holds")
    p.add_argument("--quick", action="store_true", help="presence and sizes only (no sha256)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("repair", help="recompute exactly the damaged units of a batch (see `fm verify`)")
    p.add_argument("batch", nargs="?")
    p.add_argument("--stage", help="only this stage's output (default: every stage of the batch)")
    p.add_argument("--cas", action="store_true", help="restore damaged CAS objects from their landed copies")
    p.add_argument("--no-release", action="store_true", help="do not re-assemble the dataset release")
    p.set_defaults(func=cmd_repair)

    p = sub.add_parser(
        "demo", help="sample text, images and audio -> 5 batches -> run -> report -> read shards back"
    )
    p.add_argument("--max-docs", type=int, default=1500, help="documents per package")
    p.add_argument("--media-samples", type=int, default=60, help="image-text and audio-text samples (each)")
    p.add_argument("--no-media", action="store_true", help="text only (no image or audio batches)")
    p.set_defaults(func=cmd_demo)
    return parser


# libraries whose DEBUG lines carry request headers and SigV4 signing material: kept at INFO even with -v
CHATTY_LOGGERS = ("botocore", "aiobotocore", "boto3", "s3transfer", "urllib3", "s3fs", "aiohttp", "fsspec")


def configure_logging(*, verbose: bool) -> None:
    """Log to stderr; with -v at DEBUG, except the HTTP/S3 libraries' wire dumps, and every line redacted
    (access key ids, signatures, credential scopes, tokens: ``storage_errors.RedactingFilter``)."""
    level = logging.DEBUG if verbose else logging.WARNING
    # the handler's level too: libraries that set their own loggers to INFO (great-expectations does) stay quiet
    handler = logging.StreamHandler()
    handler.setLevel(level)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", handlers=[handler])
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter([os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
                                               os.environ.get("AWS_ACCESS_KEY_ID", ""),
                                               os.environ.get("AWS_SESSION_TOKEN", "")]))  # fmt: skip


def check_identifiers(args: argparse.Namespace) -> None:
    """Every batch id and source name given on the command line, checked before the command touches the root
    (a lock file, a record): ``InvalidIdentifierError`` names the first bad one."""
    batches = list(getattr(args, "batches", None) or [])
    if getattr(args, "batch", None) is not None:  # "" is a bad batch id too
        batches.append(args.batch)
    for batch in batches:
        check_batch_id(batch)
    source = getattr(args, "source", None)
    if args.command in ("land", "revoke") and source is not None and source != "*":
        check_source_name(source)


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    if argv is None:  # the `fm` process itself, about to exit (a caller passing arguments goes on)
        # Python's collection of everything a command built (Dagster's, SQLAlchemy's and pyarrow's object
        # graphs) took ~2 s at the exit of an `fm run`; frozen, the OS frees it. Atexit handlers (the unit
        # pools' shutdown, temporary folders) still run; committed SQLite WAL pages are kept by the file.
        gc.freeze()
    return code


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(verbose=args.verbose)
    try:
        settings = load_settings(root=args.root)
    except ValidationError as exc:
        console.print(f"[red]fm: invalid settings (FM_* environment variables):\n{exc}[/red]")
        return 2
    try:
        check_identifiers(args)
        if args.command not in OFFLINE_COMMANDS:
            _store(settings).check_reachable()  # an unreachable store says so first, not "no batch found"
        code = int(args.func(args, settings) or 0)
        sys.stdout.flush()  # a reader that left shows up here, not in the interpreter's exit flush
        return code
    except (StorageUnavailableError, InvalidIdentifierError) as exc:
        console.print(f"[red]fm {args.command}: {exc}[/red]", highlight=False)
        return 2
    except BrokenPipeError:
        return reader_left()  # the reader went away (`fm rejects B | head`): stop quietly, like Unix tools
    except Exception as exc:  # a full disk or an endpoint lost mid-command: one line, not a traceback
        message = one_line_error(exc, where=settings.root, endpoint_url=settings.s3_endpoint_url or "")
        if message is None:
            raise
        console.print(f"[red]fm {args.command}: {message}[/red]", highlight=False)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
