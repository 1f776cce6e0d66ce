"""``fm verify``: check every committed byte of a root (or of one dataset release) against what its writer
recorded, and say how to repair what is damaged.

What is checked: every current stage output of every batch (each file's size and sha256 from its
``_SUCCESS.json``), the content-addressed store (each object's sha256 is its name), the landed raw files
(against ``_batch.json``), and each dataset release (``fm_loader.verify``: every shard's size and sha256
against the manifest, and every sample's bytes, all members and tar headers, against its index). ``quick=True`` checks presence and sizes only (one listing per output).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from fm_assets.engine import layout
from fm_assets.engine.integrity import HASH_THREADS, Damage, check_output, repair_command
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.refs import batches_with_ref, read_ref, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import ALL_STAGE_NAMES
from fm_loader.kinds import parse_manifest
from fm_loader.media.manifest import MediaManifest

log = logging.getLogger(__name__)


@dataclass
class Finding:
    """One damaged thing, what is wrong with it and the command that repairs it."""

    kind: str  # stage_output | cas | landing | release
    path: str
    problem: str
    repair: str


@dataclass
class VerifyReport:
    outputs_checked: int = 0
    files_checked: int = 0
    bytes_checked: int = 0
    cas_checked: int = 0
    releases_checked: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "outputs_checked": self.outputs_checked,
            "files_checked": self.files_checked,
            "bytes_checked": self.bytes_checked,
            "cas_checked": self.cas_checked,
            "releases_checked": self.releases_checked,
            "findings": [vars(f) for f in self.findings],
        }


def _stage_finding(d: Damage) -> Finding:
    return Finding(
        "stage_output", d.path, d.describe().removeprefix(d.path + " "), repair_command(d.stage, d.batch)
    )


def verify_stage_outputs(
    store: ObjectStore, report: VerifyReport, batches: set[str] | None, quick: bool, tick: Callable[[], None]
) -> None:
    for stage in ALL_STAGE_NAMES:
        for batch in batches_with_ref(store, stage):
            if batches is not None and batch not in batches:
                continue
            ref = read_ref(store, stage, batch)
            if ref is None:
                continue
            try:
                success = read_success_at(store, ref.prefix)
            except (OSError, ValueError, TypeError) as exc:
                marker = layout.success_marker(ref.prefix)
                fix = repair_command(stage, batch)
                report.findings.append(Finding("stage_output", marker, f"is unreadable ({exc})", fix))
                continue
            report.outputs_checked += 1
            report.files_checked += len(success.files)
            report.bytes_checked += sum(max(0, f["bytes"]) for f in success.files.values())
            report.findings += [_stage_finding(d) for d in check_output(store, success, full=not quick)]
            tick()


def verify_cas(store: ObjectStore, report: VerifyReport, quick: bool) -> None:
    """Every CAS object's sha256 is its name; a damaged one is restored from a landed copy by ``fm repair``."""
    objects = [rel for shard in store.list("cas") for rel in store.list(shard)]
    report.cas_checked = len(objects)
    if quick:
        return

    def check(rel: str) -> Finding | None:
        name = rel.rsplit("/", 1)[-1]
        found = store.sha256(rel)
        if found == name:
            return None
        return Finding(
            "cas", rel, f"has sha256 {found[:16]}..., its name promises {name[:16]}...", "fm repair --cas"
        )

    with ThreadPoolExecutor(HASH_THREADS) as pool:
        report.findings += [f for f in pool.map(check, objects) if f is not None]


def verify_landing(store: ObjectStore, report: VerifyReport, batches: set[str] | None, quick: bool) -> None:
    for batch in list_complete_batches(store):
        if batches is not None and batch not in batches:
            continue
        manifest = read_batch_manifest(store, batch)
        sizes = store.sizes_under(f"landing/{batch}/files")
        for entry in manifest.files:
            rel = layout.landed_file(batch, entry["path"])
            size = sizes.get(entry["path"])
            if size is None:
                problem = "is missing"
            elif size != entry["bytes"]:
                problem = f"has {size} bytes, {entry['bytes']} were landed"
            elif not quick and store.sha256(rel) != entry["sha256"]:
                problem = "does not match the sha256 recorded at landing"
            else:
                continue
            report.findings.append(
                Finding(
                    "landing", rel, problem, "landed data is immutable: land the source again as a new batch"
                )
            )


def verify_releases(store: ObjectStore, report: VerifyReport, dataset: str | None, quick: bool) -> set[str]:
    """Check each release's shard references; returns the batches the checked releases hold."""
    from fm_loader.verify import verify_dataset

    batches: set[str] = set()
    names = [dataset] if dataset else [p.rsplit("/", 1)[-1] for p in store.list("datasets")]
    for name in names:
        latest = layout.dataset_latest(name)
        if not store.exists(latest):
            if dataset:
                raise ValueError(
                    f"dataset {dataset!r} has no release under {store.uri('datasets')}; see `fm report`"
                )
            continue
        version = store.read_json(latest)["version"]
        folder = layout.dataset_dir(name, version)
        rel = layout.dataset_manifest(name, version)
        manifest = parse_manifest(store.read_bytes(rel), store.uri(rel))
        if isinstance(manifest, MediaManifest):
            batches.update(_verify_media_release(store, report, name, version, manifest, quick))
            continue
        report.releases_checked += 1
        batches.update(manifest.extra.get("batches", []))
        if quick:
            for entry in manifest.shards:
                rel = layout.normalize_path(f"{folder}/{entry.path}")
                if not store.exists(rel):
                    report.findings.append(_release_finding(rel, f"is missing (release {name}@{version})"))
            continue
        # every shard's sha256, then every sample's bytes (all members, headers) against the index
        checked = verify_dataset(store.uri(layout.dataset_manifest(name, version)), store.storage_options)
        for problem in checked.problems:
            rel = layout.normalize_path(f"{folder}/{problem.shard}")
            row = f" row {problem.row}" if problem.row is not None else ""
            report.findings.append(
                _release_finding(
                    rel, f"{row.strip() + ': ' if row else ''}{problem.what} (release {name}@{version})"
                )
            )
    return batches


def _release_finding(rel: str, problem: str, stage: str = "shard") -> Finding:
    where = layout.stage_output_of(rel)
    return Finding("release", rel, problem, repair_command(stage, where[1]) if where else "fm run")


def _verify_media_release(
    store: ObjectStore, report: VerifyReport, name: str, version: str, manifest: MediaManifest, quick: bool
) -> list[str]:
    """A multimodal release: every shard and sample index present (quick) or matching its sha256."""
    folder = layout.dataset_dir(name, version)
    report.releases_checked += 1
    for entry in manifest.shards:
        for path, digest in ((entry.path, entry.sha256), (entry.index_path, entry.index_sha256)):
            rel = layout.normalize_path(f"{folder}/{path}")
            if not store.exists(rel):
                problem = "is missing"
            elif not quick and store.sha256(rel) != digest:
                problem = "does not match its sha256 in the manifest"
            else:
                continue
            report.findings.append(
                _release_finding(rel, f"{problem} (release {name}@{version})", "media_shard")
            )
    return list(manifest.extra.get("batches", []))


def verify_root(
    store: ObjectStore,
    *,
    dataset: str | None = None,
    quick: bool = False,
    tick: Callable[[], None] = lambda: None,
) -> VerifyReport:
    """Check the whole root, or with ``dataset`` that release and the batches it holds."""
    report = VerifyReport()
    release_batches = verify_releases(store, report, dataset, quick)
    batches = release_batches if dataset else None
    verify_stage_outputs(store, report, batches, quick, tick)
    verify_landing(store, report, batches, quick)
    if dataset is None:
        verify_cas(store, report, quick)
    log.info(
        "verified %d outputs (%d files, %d bytes), %d CAS objects, %d releases: %d findings",
        report.outputs_checked, report.files_checked, report.bytes_checked, report.cas_checked,
        report.releases_checked, len(report.findings),
    )  # fmt: skip
    return report
