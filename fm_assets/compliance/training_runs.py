"""The training runs that read each dataset version, from the read receipts trainers leave under the storage
root (``receipts/<run_id>/rank-*/...json``, written by ``fm_loader.receipts``): what ``fm revoke`` names as
the runs that saw a revoked version, and what ``fm audit`` lists per version."""

from __future__ import annotations

from typing import Any

from fm_assets.engine.store import ObjectStore
from fm_loader.receipts import read_receipts, runs_by_version


def runs_per_version(store: ObjectStore) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(dataset, version) -> the runs that read it, each with its furthest position (see ``runs_by_version``)."""
    return runs_by_version(read_receipts(store.root, store.storage_options or None))


def runs_reading(store: ObjectStore, versions: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """One row per (dataset version, run) for the given versions, oldest version first."""
    runs = runs_per_version(store)
    return [
        {"dataset": name, "version": version, **run}
        for name, version in versions
        for run in runs.get((name, version), [])
    ]


def as_rows(runs: dict[tuple[str, str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The same as a flat list (for JSON)."""
    return [
        {"dataset": name, "version": version, **run}
        for (name, version), found in sorted(runs.items())
        for run in found
    ]
