"""Landing batches: create an immutable batch from local files and discover complete batches.

``landing/<batch>/files/<relpath>`` holds the raw files as delivered; ``landing/<batch>/_batch.json``
is written LAST, so its presence means the batch is complete (the sensor relies on that).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fm_assets.engine.store import ObjectStore, sha256_file

NAMESPACES = ("cloud", "on_device", "quarantine")
SPDX_PATTERN = re.compile(
    r"^(LicenseRef-[A-Za-z0-9.\-]+|[A-Za-z0-9][A-Za-z0-9.\-+]*)( (AND|OR|WITH) [A-Za-z0-9.\-+]+)*$"
)
BATCH_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class LandingError(ValueError):
    """A landing request that cannot be accepted; the message says what to fix."""


@dataclass(frozen=True)
class BatchManifest:
    batch: str
    source: str
    license: str
    namespace: str
    files: tuple[dict[str, Any], ...]  # {"path": rel under files/, "sha256", "bytes"}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BatchManifest:
        return cls(
            batch=obj["batch"],
            source=obj.get("source") or "",
            license=obj.get("license") or "",
            namespace=obj.get("namespace") or "",
            files=tuple(obj.get("files", ())),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "source": self.source,
            "license": self.license,
            "namespace": self.namespace,
            "files": list(self.files),
        }

    @property
    def data_version(self) -> str:
        return hashlib.sha256(
            repr(sorted((f["path"], f["sha256"]) for f in self.files)).encode()
        ).hexdigest()[:32]


def validate_landing_args(source: str, license_id: str | None, namespace: str) -> None:
    if not source or not BATCH_ID_PATTERN.match(source):
        raise LandingError(f"--source {source!r} must be a short name of letters, digits, '_', '.', '-'")
    if not license_id:
        raise LandingError(
            "a batch needs a licence: pass --license with an SPDX identifier (e.g. CC-BY-SA-4.0, MIT)"
        )
    if not SPDX_PATTERN.match(license_id):
        raise LandingError(
            f"--license {license_id!r} is not an SPDX identifier or expression (e.g. 'GPL-2.0-or-later')"
        )
    if namespace not in NAMESPACES:
        raise LandingError(f"--namespace {namespace!r} is unknown; choose one of {', '.join(NAMESPACES)}")


def _source_files(src: Path) -> list[tuple[Path, str]]:
    if src.is_file():
        return [(src, src.name)]
    if src.is_dir():
        found = sorted(p for p in src.rglob("*") if p.is_file() and not p.name.startswith("."))
        return [(p, p.relative_to(src).as_posix()) for p in found]
    raise LandingError(f"{src} does not exist")


def land_batch(
    store: ObjectStore,
    src: str | Path,
    *,
    source: str,
    license_id: str,
    namespace: str,
    batch_id: str | None = None,
    now: dt.datetime | None = None,
) -> BatchManifest:
    """Copy ``src`` (a file or folder) into a new landing batch and return its manifest."""
    validate_landing_args(source, license_id, namespace)
    files = _source_files(Path(src))
    if not files:
        raise LandingError(f"{src} holds no files to land")
    described = [
        {"path": rel, "sha256": sha256_file(path), "bytes": path.stat().st_size} for path, rel in files
    ]
    if batch_id is None:
        stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%dT%H%M%S%fZ")
        content = hashlib.sha256(repr([(f["path"], f["sha256"]) for f in described]).encode()).hexdigest()[:8]
        batch_id = f"{stamp}-{source}-{content}"
    if not BATCH_ID_PATTERN.match(batch_id):
        raise LandingError(f"batch id {batch_id!r} has characters that are not allowed")
    if store.exists(f"landing/{batch_id}/_batch.json"):
        raise LandingError(f"batch {batch_id} already exists; landing is immutable, pick another id")
    for path, rel in files:
        store.put_file(path, f"landing/{batch_id}/files/{rel}")
    manifest = BatchManifest(batch_id, source, license_id, namespace, tuple(described))
    store.write_json(f"landing/{batch_id}/_batch.json", manifest.to_json())  # written last: batch complete
    return manifest


def list_complete_batches(store: ObjectStore) -> list[str]:
    """Batch ids whose ``_batch.json`` exists, in landing (lexicographic id) order."""
    batches = []
    for entry in store.list("landing"):
        name = entry.rsplit("/", 1)[-1]
        if store.exists(f"landing/{name}/_batch.json"):
            batches.append(name)
    return sorted(batches)


def read_batch_manifest(store: ObjectStore, batch: str) -> BatchManifest:
    rel = f"landing/{batch}/_batch.json"
    if not store.exists(rel):
        raise LandingError(f"batch {batch} is not complete (no {rel})")
    return BatchManifest.from_json(store.read_json(rel))
