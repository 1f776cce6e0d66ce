"""Rich tables the CLI prints (shared by `fm run`, `fm report` and `fm demo`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from fm_assets.engine.store import ObjectStore
from fm_assets.reports.report import build_report


def add_id_column(table: Table, header: str = "batch") -> None:
    """A column of ids (batch ids): never cut, wrapped or ellipsized, so even a narrow terminal shows each id
    whole on one line to copy; the other columns give way."""
    table.add_column(header, no_wrap=True, overflow="fold")


def print_summary(console: Console, store: ObjectStore, batches: list[str] | None) -> list[dict[str, Any]]:
    """The per-stage table of `fm run`, `fm report` and `fm demo`."""
    rows = build_report(store, batches)
    table = Table(title="per-stage summary")
    add_id_column(table)
    for column in (
        "stage",
        "in",
        "out",
        "rejected",
        "top reject reasons",
        "tokens",
        "pack eff.",
        "cache",
        "wall s",
    ):
        table.add_column(column, overflow="fold")
    for row in rows:
        reasons = sorted(row["rejects_by_reason"].items(), key=lambda kv: -kv[1])[:3]
        table.add_row(
            row["batch"],
            row["stage"],
            f"{row['records_in']:,}",
            f"{row['records_out']:,}",
            f"{row['records_rejected']:,}",
            ", ".join(f"{k}={v}" for k, v in reasons),
            f"{row['tokens']:,}" if row["tokens"] else "",
            f"{row['packing_efficiency']:.4f}" if row["packing_efficiency"] else "",
            "hit" if row["cache_hit"] else "computed",
            f"{row['wall_seconds']:.2f}" if row["wall_seconds"] is not None else "",
        )
    console.print(table)
    return rows
