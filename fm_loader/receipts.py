"""Read receipts: which training run read which dataset version, with which seed and world size, how far.

Opt-in: ``Loader(..., run_id="llama-7b-042", receipts="s3://bucket/root")`` (or the environment variables
``FM_LOADER_RUN_ID`` and ``FM_LOADER_RECEIPTS``, read once when the loader is built). Every
``Loader.state_dict()`` (a checkpoint) and ``Loader.close()`` then writes one small JSON record per rank under
the storage root::

    <root>/receipts/<run_id>/rank-<rank:05d>/<plan fingerprint>-e<epoch:04d>-<position:012d>.json

named by the loader's plan and position, so a resumed run rewrites the same record for the same position
instead of adding another, and the loaders of one run (a text and an image loader, validation loaders) keep
theirs apart. ``run_id=""`` or ``receipts=""`` turns receipts off whatever the environment says (the
loader's own ``DataLoader`` workers are built so). Each file is written whole (a temporary name then a rename locally; one PUT on an object
store), by a background thread, so the training step never waits for storage; a failed write is logged,
never raised into the trainer. The platform reads them back (``fm revoke`` names the runs that read a revoked
version, ``fm audit`` lists the runs per version) with :func:`read_receipts`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fm_loader.storage import read_bytes, write_bytes_atomic

if TYPE_CHECKING:
    from fm_loader.loader import Loader

logger = logging.getLogger(__name__)

FORMAT = "fm_loader.receipt/1"
FOLDER = "receipts"
ENV_ROOT = "FM_LOADER_RECEIPTS"
ENV_RUN_ID = "FM_LOADER_RUN_ID"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def receipt_name(rank: int, plan: str, epoch: int, position: int) -> str:
    """The record of one rank's loader (its plan fingerprint) at one position, relative to the run's folder."""
    return f"rank-{rank:05d}/{plan}-e{epoch:04d}-{position:012d}.json"


def settings_from(run_id: str | None, root: str | None) -> tuple[str, str] | None:
    """(run id, storage root) when receipts are on: the arguments, else the environment (read here, once).

    Raises:
        ValueError: Only one of the two is given, or the run id is not a plain name (it becomes a folder).
    """
    if run_id == "" or root == "":
        return None  # turned off explicitly
    run_id = run_id if run_id is not None else os.environ.get(ENV_RUN_ID) or None
    root = root if root is not None else os.environ.get(ENV_ROOT) or None
    if run_id is None and root is None:
        return None
    if run_id is None or root is None:
        raise ValueError(
            f"read receipts need both run_id= and receipts= (or {ENV_RUN_ID} and {ENV_ROOT}); got "
            f"run_id={run_id!r}, receipts={root!r}"
        )
    if not RUN_ID.match(run_id):
        raise ValueError(f"run_id {run_id!r}: letters, digits, '.', '_' and '-' only (at most 128)")
    return run_id, root


@dataclass(frozen=True)
class DatasetRead:
    """One dataset version a loader reads."""

    name: str
    version: str
    location: str
    namespace: str


class Receipts:
    """Writes the read receipts of one loader (one rank of one run) in the background."""

    def __init__(self, run_id: str, root: str, storage_options: dict[str, Any] | None = None) -> None:
        self.run_id, self.root = run_id, root.rstrip("/")
        self.storage_options = storage_options
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fm-receipts")
        self._pending: list[Future[Any]] = []
        self._sha256: dict[str, str] = {}
        self._last: str | None = None

    def folder(self) -> str:
        return f"{self.root}/{FOLDER}/{self.run_id}"

    def record(self, context: dict[str, Any], datasets: list[DatasetRead], state: dict[str, Any]) -> None:
        """Queue the record of ``state`` (a copy is taken now); returns at once."""
        progress = int(state.get("rows_consumed", state.get("samples_consumed", 0)))
        name = receipt_name(int(context["rank"]), str(state["fingerprint"]), int(state["epoch"]), progress)
        if name == self._last:
            return  # the same position again: already written
        self._last = name
        body = {"format": FORMAT, "run_id": self.run_id, **context, "state": dict(state)}
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(self._write, name, body, list(datasets)))

    def _write(self, name: str, body: dict[str, Any], datasets: list[DatasetRead]) -> None:
        uri = f"{self.folder()}/{name}"
        try:
            body["datasets"] = [
                {
                    "name": d.name,
                    "version": d.version,
                    "manifest": d.location,
                    "manifest_sha256": self._manifest_sha256(d.location),
                    "namespace": d.namespace,
                }
                for d in datasets
            ]
            body["written_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            data = json.dumps(body, sort_keys=True).encode()
            write_bytes_atomic(uri, data, self.storage_options)
        except Exception:  # a receipt must never take a training run down
            logger.exception("could not write read receipt %s", uri)

    def _manifest_sha256(self, location: str) -> str:
        if location and location not in self._sha256:
            try:
                self._sha256[location] = hashlib.sha256(
                    read_bytes(location, self.storage_options)
                ).hexdigest()
            except OSError:
                self._sha256[location] = ""
        return self._sha256.get(location, "")

    def prime(self, locations: list[str]) -> None:
        """Hash the manifests now, in the background (before any record): a receipt names the manifest as the
        loader read it, even if the release is marked revoked (its manifest rewritten) later in the run."""
        for location in locations:
            self._pending.append(self._pool.submit(self._manifest_sha256, location))

    def flush(self) -> None:
        """Wait for the queued records."""
        for future in self._pending:
            future.result()
        self._pending = []

    def close(self) -> None:
        self.flush()
        self._pool.shutdown(wait=True)


class LoaderReceipts:
    """The hook a :class:`~fm_loader.loader.Loader` calls on ``state_dict()`` and ``close()``."""

    def __init__(self, loader: Loader, run_id: str, root: str) -> None:
        self.loader = loader
        self.writer = Receipts(run_id, root, loader.options.read.storage_options)
        self._epoch_steps: dict[int, int] = {}
        self.writer.prime([d.location for d in self.datasets()])

    def datasets(self) -> list[DatasetRead]:
        builder = self.loader._builder
        mixture = getattr(builder, "mixture", None)
        sources = mixture.sources if mixture is not None else getattr(builder, "sources", [])
        found = []
        for src in sources:
            manifest = getattr(src, "manifest", None)
            if manifest is None:  # an MDS folder: no release version
                found.append(DatasetRead(src.name, "", getattr(src, "origin", ""), src.namespace))
            else:
                found.append(
                    DatasetRead(manifest.name, manifest.version, manifest.location, manifest.namespace)
                )
        return found

    def steps_consumed(self, state: dict[str, Any]) -> int:
        """Global batches handed out from the start of epoch 0 to ``state``."""
        loader = self.loader
        epoch = int(state["epoch"])
        if "rows_consumed" in state:  # packed tokens: every epoch has ceil(rows / G) batches
            per_epoch = -(-loader.epoch_rows // loader.global_batch_size)
            return epoch * per_epoch + -(-int(state["rows_consumed"]) // loader.global_batch_size)
        for e in range(epoch):  # media: an epoch's bucketed plan sets its batch count
            if e not in self._epoch_steps:
                self._epoch_steps[e] = sum(1 for _ in loader._builder.steps(e, (0, 0), e + 1))
        return sum(self._epoch_steps[e] for e in range(epoch)) + int(state.get("batches_emitted", 0))

    def checkpoint(self, state: dict[str, Any]) -> None:
        loader = self.loader
        mixture = getattr(loader._builder, "mixture", None)
        context = {
            "rank": loader.rank,
            "world_size": loader.world_size,
            "global_batch_size": loader.global_batch_size,
            "seed": loader.seed,
            "kind": loader.kind,
            "mixture": dict(mixture.spec) if mixture is not None and mixture.spec else None,
            "steps_consumed": self.steps_consumed(state),
        }
        self.writer.record(context, self.datasets(), state)

    def close(self) -> None:
        self.checkpoint(self.loader.state_dict_plain())
        self.writer.close()


def attach(loader: Loader, run_id: str | None, root: str | None) -> LoaderReceipts | None:
    """The receipts hook of ``loader`` when receipts are on (arguments, else the environment), else None."""
    on = settings_from(run_id, root)
    return LoaderReceipts(loader, *on) if on else None


def read_receipts(root: str, storage_options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every receipt under ``root``'s ``receipts/`` (local or fsspec URI); unreadable ones are skipped with a
    warning."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(f"{root.rstrip('/')}/{FOLDER}", **(storage_options or {}))
    if not fs.exists(path):
        return []
    found = []
    for file in sorted(fs.find(path)):
        if not file.endswith(".json"):
            continue
        try:
            with fs.open(file, "rb") as handle:
                record = json.loads(handle.read())
        except (OSError, ValueError) as exc:
            logger.warning("skipping unreadable receipt %s: %s", file, exc)
            continue
        if isinstance(record, dict) and record.get("format") == FORMAT:
            found.append(record)
    return found


def runs_by_version(receipts: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(dataset, version) -> the runs that read it: run id, seed, world size, ranks seen, and the furthest
    position any rank reported (global batches consumed, the last step's index, its epoch) and when."""
    runs: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in receipts:
        for dataset in record.get("datasets", []):
            key = (dataset["name"], dataset["version"], record["run_id"])
            run = runs.setdefault(
                key,
                {
                    "run_id": record["run_id"],
                    "seed": record.get("seed"),
                    "world_size": record.get("world_size"),
                    "global_batch_size": record.get("global_batch_size"),
                    "manifest_sha256": dataset.get("manifest_sha256", ""),
                    "ranks": [],
                    "steps_consumed": 0,
                    "last_step": None,
                },
            )
            if record.get("rank") not in run["ranks"]:
                run["ranks"].append(record.get("rank"))
            steps = int(record.get("steps_consumed", 0))
            if steps > run["steps_consumed"]:
                run.update(
                    steps_consumed=steps,
                    last_step=steps - 1,  # the index of the last global batch read
                    epoch=record["state"].get("epoch"),
                    at=record.get("written_at"),
                )
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for (name, version, _), run in sorted(runs.items()):
        run["ranks"].sort()
        out.setdefault((name, version), []).append(run)
    return out
