"""The ``fm`` command line: sample-data, land, run, report, rejects, audit and demo."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from fm_assets.cli.tables import print_summary
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import Settings, load_settings

console = Console(stderr=True, soft_wrap=True)
out = Console()

DEMO_LICENSES = {"python-stdlib": "PSF-2.0"}


def _store(settings: Settings) -> ObjectStore:
    from fm_resources.object_store import ObjectStoreResource

    return ObjectStoreResource(
        root=settings.root, s3_endpoint_url=settings.s3_endpoint_url, s3_region=settings.s3_region
    ).store()


def cmd_sample_data(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.sample_data import fetch_sample_data

    summary = fetch_sample_data(Path(args.dest), max_docs=args.max_docs, source=args.source)
    table = Table(title=f"sample data ({summary['source']})")
    for column in ("package", "docs", "bytes", "licence"):
        table.add_column(column)
    for name, info in summary["packages"].items():
        table.add_row(name, str(info["docs"]), f"{info['bytes']:,}", info.get("license", "?"))
    console.print(table)
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
    console.print(f"landed {len(manifest.files)} file(s) as batch [bold]{manifest.batch}[/bold]")
    out.print(manifest.batch, highlight=False)
    return 0


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli.runner import UnknownBatchError, run_batches
    from fm_assets.engine.landing import list_complete_batches

    if not list_complete_batches(_store(settings)):
        console.print(
            f"[red]fm run: no complete landing batch under {settings.root}; create one with `fm land`[/red]"
        )
        return 2
    try:
        failures = run_batches(settings, args.batches or None, release=not args.no_release, console=console)
    except UnknownBatchError as exc:
        console.print(f"[red]fm run: {exc}[/red]")
        return 2
    print_summary(console, _store(settings), args.batches or None)
    if failures:
        for batch, message in failures.items():
            console.print(f"[red]batch {batch} failed: {message}[/red]")
        return 1
    return 0


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.reports.report import build_report

    if args.json:
        out.print_json(json.dumps(build_report(_store(settings), args.batches or None)))
    else:
        print_summary(console, _store(settings), args.batches or None)
    return 0


def cmd_rejects(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.reports.report import iter_rejects

    for row in iter_rejects(_store(settings), args.batch, args.stage):
        if not args.with_text:
            row["text"] = (row["text"] or "")[:200]
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


def cmd_audit(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.reports.audit import build_audit

    audit = build_audit(_store(settings), args.dataset)
    if args.json:
        out.print_json(json.dumps(audit, default=str))
        return 0
    table = Table(title="licences: where they ended up")
    for column in ("licence", "docs landed", "docs in shards", "tokens in shards"):
        table.add_column(column)
    for licence, row in sorted(audit["licences"].items()):
        table.add_row(
            licence, f"{row['documents_landed']:,}", f"{row['documents_in_shards']:,}", f"{row['tokens']:,}"
        )
    console.print(table)
    table = Table(title="per batch evidence")
    for column in (
        "batch",
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
    console.print(table)
    if audit["failed_checks"]:
        console.print(f"[yellow]failed checks: {', '.join(audit['failed_checks'])}[/yellow]")
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from fm_assets.cli.demo import run_demo

    return run_demo(settings, max_docs=args.max_docs, console=console, out=out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fm", description="FM data platform: raw text -> training shards.")
    parser.add_argument(
        "--root", help="storage root (local folder or s3://bucket/prefix); default $FM_ROOT or ./fm_data"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sample-data", help="fetch real public text (Debian doc packages) as JSONL")
    p.add_argument("dest")
    p.add_argument("--max-docs", type=int, default=None, help="cap documents per package")
    p.add_argument("--source", choices=("auto", "apt", "python"), default="auto")
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
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "report", help="records in/out/rejected, reasons, tokens, cache hits per batch and stage"
    )
    p.add_argument("batches", nargs="*")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("rejects", help="rejected records of a batch as JSONL")
    p.add_argument("batch")
    p.add_argument("--stage")
    p.add_argument("--with-text", action="store_true", help="full text instead of a 200-char prefix")
    p.set_defaults(func=cmd_rejects)

    p = sub.add_parser("audit", help="compliance report: licences, PII flags, eval leakage, check outcomes")
    p.add_argument("--dataset", help="limit to the batches of this dataset's latest version (e.g. fm-demo)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("demo", help="sample data -> 3 batches -> run -> report -> read shards back")
    p.add_argument("--max-docs", type=int, default=1500, help="documents per package")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = load_settings(root=args.root)
    except ValidationError as exc:
        console.print(f"[red]fm: invalid settings (FM_* environment variables):\n{exc}[/red]")
        return 2
    return int(args.func(args, settings) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
