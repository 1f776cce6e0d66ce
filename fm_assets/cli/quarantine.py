"""``fm quarantine list|promote|reject``: the review of quarantine batches (recorded, then audited)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from fm_assets.cli.tables import add_id_column
from fm_assets.compliance.namespaces import quarantine_rows
from fm_assets.compliance.promotions import (
    RELEASE_NAMESPACES,
    ReviewError,
    promote,
    reject,
)
from fm_assets.engine.store import ObjectStore


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "quarantine",
        help="review quarantine batches: list, promote to a namespace, reject",
    )
    actions = p.add_subparsers(dest="action", required=True)
    a = actions.add_parser("list", help="quarantine batches and their review status")
    a.add_argument("--json", action="store_true")
    a = actions.add_parser("promote", help="release a reviewed quarantine batch into a namespace")
    a.add_argument("batch")
    a.add_argument("--to", required=True, choices=RELEASE_NAMESPACES)
    a.add_argument("--reviewer", help="who reviewed it (required)")
    a.add_argument("--reason", help="why it may be released (required)")
    a = actions.add_parser("reject", help="keep a quarantine batch out for good")
    a.add_argument("batch")
    a.add_argument("--reviewer", help="who reviewed it (required)")
    a.add_argument("--reason", help="why it is rejected (required)")
    return p


def run(args: argparse.Namespace, store: ObjectStore, console: Console, out: Console) -> int:
    if args.action == "list":
        rows = quarantine_rows(store)
        if args.json:
            out.print_json(json.dumps(rows))
            return 0
        table = Table(title="quarantine batches")
        add_id_column(table)
        for column in (
            "source",
            "licence",
            "status",
            "reviewer",
            "to",
            "reason",
        ):
            table.add_column(column, overflow="fold")
        for row in rows:
            decision = row["decision"] or {}
            table.add_row(
                row["batch"],
                row["source"],
                row["license"],
                row["status"],
                decision.get("reviewer", ""),
                decision.get("to") or "",
                decision.get("reason", ""),
            )
        out.print(table)
        return 0
    try:
        if args.action == "promote":
            decision = promote(
                store,
                args.batch,
                to=args.to,
                reviewer=args.reviewer,
                reason=args.reason,
            )
            out.print(
                f"promoted {decision.batch} to {decision.to} (reviewer {decision.reviewer}); process and release "
                f"it with `fm run {decision.batch}`",
                highlight=False,
            )
        else:
            decision = reject(store, args.batch, reviewer=args.reviewer, reason=args.reason)
            out.print(
                f"rejected {decision.batch} (reviewer {decision.reviewer}): never processed",
                highlight=False,
            )
    except ReviewError as exc:
        console.print(f"[red]fm quarantine {args.action}: {exc}[/red]", highlight=False)
        return 2
    return 0
