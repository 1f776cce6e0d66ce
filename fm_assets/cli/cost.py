"""`fm report --cost [--by namespace|source|team]`: CPU seconds, bytes and tokens per stage (of every chain) and
label."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from fm_assets.engine.store import ObjectStore
from fm_assets.reports.cost import LABELS, cost_by, cost_rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cost", action="store_true", help="cost per stage and label instead of accounting")
    parser.add_argument("--by", choices=LABELS, default="namespace", help="with --cost: the label to sum by")


def print_cost(
    args: argparse.Namespace, store: ObjectStore, teams: dict[str, str], out: Console, *, as_json: bool
) -> int:
    rows = cost_by(cost_rows(store, args.batches or None, teams), args.by)
    if as_json:
        out.print_json(json.dumps(rows))
        return 0
    table = Table(title=f"cost per stage and {args.by}")
    for column in (args.by, "chain", "stage", "CPU s", "read MB", "written MB", "stored MB", "tokens"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row[args.by],
            row["chain"],
            row["stage"],
            f"{row['cpu_seconds']:.2f}",
            f"{row['bytes_read'] / 1e6:.2f}",
            f"{row['bytes_written'] / 1e6:.2f}",
            f"{row['bytes_stored'] / 1e6:.2f}",
            f"{row['tokens']:,}" if row["tokens"] else "",
        )
    out.print(table)
    return 0
