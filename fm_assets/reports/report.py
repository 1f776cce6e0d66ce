"""Per-batch, per-stage accounting read back from refs and ``_SUCCESS.json`` files (the ``fm report`` data)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.refs import read_ref, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.batch_chains import batch_chains
from fm_assets.stages.names import ALL_STAGE_NAMES, CHAIN_NAMES

log = logging.getLogger(__name__)


def stage_report(store: ObjectStore, batch: str, stage: str) -> dict[str, Any] | None:
    ref = read_ref(store, stage, batch)
    if ref is None:
        return None
    try:
        success = read_success_at(store, ref.prefix)
    except (OSError, ValueError) as exc:  # damaged or deleted output: `fm verify` / `fm repair` say more
        log.warning(
            "%s[%s]: its current output %s cannot be read (%s); run `fm verify`",
            stage,
            batch,
            ref.prefix,
            exc,
        )
        return None
    counts = success.counts
    return {
        "batch": batch,
        "stage": stage,
        "records_in": counts.records_in,
        "records_out": counts.records_out,
        "records_rejected": counts.records_rejected,
        "rejects_by_reason": success.rejects_by_reason,
        "bytes_in": success.extra.get("bytes_in"),
        "bytes_out": counts.bytes_out,
        "tokens": success.extra.get("tokens"),
        "packing_efficiency": success.artifacts.get("packing_efficiency")
        if stage in ("pack", "shard")
        else None,
        "data_version": success.data_version,
        "key": success.key,
        "cache_hit": ref.last_cache_hit,
        "wall_seconds": ref.last_wall_seconds,
        "compute_seconds": success.seconds,
        # cost metering (reports/cost.py sums these per namespace, source and team)
        "cpu_seconds": success.cost.get("cpu_seconds"),
        "bytes_read": success.cost.get("bytes_read"),
        "bytes_written": success.cost.get("bytes_written"),
        "bytes_stored": success.cost.get("bytes_stored"),
    }


def stages_of(store: ObjectStore, batch: str) -> list[str]:
    """The stages of the chains ``batch`` feeds (``batch_chains``), in chain order: a media batch has no text
    rows, a text batch no media rows."""
    return [name for chain in batch_chains(store, batch) for name in CHAIN_NAMES[chain]]


def build_report(store: ObjectStore, batches: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    for batch in batches or list_complete_batches(store):
        for stage in stages_of(store, batch):
            row = stage_report(store, batch, stage)
            if row is not None:
                rows.append(row)
    return rows


class NoSuchBatchOrStage(KeyError):
    """No complete landing batch has that id (a typo, or a batch still landing), or no stage that name."""

    def __str__(self) -> str:  # KeyError would quote its message
        return str(self.args[0])


class NotRunError(LookupError):
    """The batch is landed, but has no output of the stage(s) asked about yet."""


def check_batches(store: ObjectStore, batches: list[str]) -> None:
    """Raise ``NoSuchBatchOrStage`` for the first of ``batches`` that is no complete landed batch."""
    for batch in batches:
        if not store.exists(layout.batch_manifest(batch)):
            raise NoSuchBatchOrStage(
                f"no complete landing batch {batch!r} under {store.uri('landing')} (`fm report` lists the batches)"
            )


def rejects_scope(store: ObjectStore, batch: str, stage: str | None = None) -> list[str]:
    """The stages whose current output ``iter_rejects`` reads for ``batch``. Raises ``NoSuchBatchOrStage`` for
    an id that is no complete landed batch or an unknown stage name, ``NotRunError`` when none of them has
    output yet, so a caller can tell a typo or a batch not run from a clean batch (no rejects)."""
    check_batches(store, [batch])
    if stage is not None and stage not in ALL_STAGE_NAMES:
        raise NoSuchBatchOrStage(f"no stage {stage!r}; stages are {', '.join(ALL_STAGE_NAMES)}")
    ran = [name for name in ([stage] if stage else stages_of(store, batch)) if read_ref(store, name, batch)]
    if not ran:
        raise NotRunError(f"{batch} has no {stage or 'stage'} output yet: run it first (`fm run {batch}`)")
    return ran


def landed_paths(store: ObjectStore, batch: str) -> dict[str, list[str]]:
    """sha256 -> the paths inside ``batch`` that hold those bytes (usually one)."""
    found: dict[str, list[str]] = {}
    for entry in read_batch_manifest(store, batch).files:
        found.setdefault(entry["sha256"], []).append(entry["path"])
    return found


def landed_file(row: dict[str, Any], paths_by_sha: dict[str, list[str]]) -> str | None:
    """The landed file a reject came from (relative to the batch's ``files/``): the one with its ``cas_hash``,
    and of identical copies the one its ``origin`` names (media: the path, plus ``#key`` in a tar or JSONL)."""
    paths = paths_by_sha.get(row["cas_hash"] or "", [])
    origin = str(row["details"].get("origin", ""))
    named = [path for path in paths if origin == path or origin.startswith(f"{path}#")]
    return (named or paths or [None])[0]


def iter_rejects(store: ObjectStore, batch: str, stage: str | None = None) -> Iterator[dict[str, Any]]:
    """Every rejected record of ``batch`` (optionally one stage) with stage, reason and details, and
    ``landed_file``: where the landed file it came from is (None when no landed file holds its bytes)."""
    paths_by_sha = landed_paths(store, batch)
    for name in [stage] if stage else stages_of(store, batch):
        ref = read_ref(store, name, batch)
        if ref is None:
            continue
        for rel in read_success_at(store, ref.prefix).rejects:
            with store.open(rel) as handle:
                for record_batch in pq.ParquetFile(handle).iter_batches(batch_size=1024):
                    for row in record_batch.to_pylist():
                        row["details"] = json.loads(row["details"]) if row["details"] else {}
                        path = landed_file(row, paths_by_sha)
                        row["landed_file"] = store.uri(layout.landed_file(batch, path)) if path else None
                        yield row
