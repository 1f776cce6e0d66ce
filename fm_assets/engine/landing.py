"""Landing batches: create an immutable batch from local files and discover complete batches.

``landing/<batch>/files/<relpath>`` holds the raw files as delivered; ``landing/<batch>/_batch.json``
is written LAST, so its presence means the batch is complete (the sensor relies on that).

What is read from SRC, by one rule each (``select_source_files``), every skipped path recorded with its
reason in the manifest (``skipped``) and in ``fm land``'s summary, never silently:

* symlinks are never followed: a link whose target leaves SRC is refused (``symlink_outside_source``: nothing
  outside the folder the user named is ever read), a link that stays inside is skipped
  (``symlink_inside_source``: its target lands as itself), so no file lands twice and no loop exists;
* hidden paths (any component starting with ``.``: ``.git/``, ``.env``) and OS metadata (``__MACOSX/``,
  ``Thumbs.db``, ``desktop.ini``) are skipped (``hidden`` / ``os_metadata``).

``_batch.sha256`` (written just before ``_batch.json``) holds the sha256 of ``_batch.json``'s bytes; every
read verifies it, so a manifest edited after landing (another licence or namespace) is refused instead of
half-applied. Batches landed before the sidecar existed are read with a warning (legacy).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fm_assets.engine.store import ObjectStore, sha256_file

NAMESPACES = ("cloud", "on_device", "quarantine")
SPDX_PATTERN = re.compile(
    r"^(LicenseRef-[A-Za-z0-9.\-]+|[A-Za-z0-9][A-Za-z0-9.\-+]*)( (AND|OR|WITH) [A-Za-z0-9.\-+]+)*$"
)
BATCH_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
OS_METADATA = frozenset({"__MACOSX", "Thumbs.db", "desktop.ini", "Icon\r"})
MANIFEST_HASH = "_batch.sha256"

log = logging.getLogger(__name__)
_LEGACY_WARNED: set[str] = set()


class LandingError(ValueError):
    """A landing request that cannot be accepted; the message says what to fix."""


@dataclass(frozen=True)
class BatchManifest:
    batch: str
    source: str
    license: str
    namespace: str
    files: tuple[dict[str, Any], ...]  # {"path": rel under files/, "sha256", "bytes"}
    skipped: tuple[dict[str, str], ...] = field(default=())  # {"path", "reason"[, "target"]}: not landed

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BatchManifest:
        return cls(
            batch=obj["batch"],
            source=obj.get("source") or "",
            license=obj.get("license") or "",
            namespace=obj.get("namespace") or "",
            files=tuple(obj.get("files", ())),
            skipped=tuple(obj.get("skipped", ())),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "source": self.source,
            "license": self.license,
            "namespace": self.namespace,
            "files": list(self.files),
            "skipped": list(self.skipped),
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


def _skip_reason(rel_parts: tuple[str, ...]) -> str | None:
    if any(part in OS_METADATA for part in rel_parts):
        return "os_metadata"
    if any(part.startswith(".") for part in rel_parts):
        return "hidden"
    return None


def select_source_files(src: Path) -> tuple[list[tuple[Path, str]], list[dict[str, str]]]:
    """(files to land as (path, rel), skipped paths with reasons) under ``src``; see the module doc."""
    src = Path(src)
    if not src.exists() and not src.is_symlink():
        raise LandingError(f"{src} does not exist")
    root = src.resolve()  # SRC itself may be a link: the user named it
    if root.is_file():
        return [(root, src.name)], []
    files: list[tuple[Path, str]] = []
    skipped: list[dict[str, str]] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in sorted([*dirs, *names]):
            path = base / name
            rel = path.relative_to(root)
            reason = _skip_reason(rel.parts)
            if path.is_symlink():
                target = path.resolve()
                inside = target == root or root in target.parents
                entry = {
                    "path": rel.as_posix(),
                    "reason": "symlink_inside_source" if inside else "symlink_outside_source",
                }
                if not inside:
                    entry["target"] = str(target)
                skipped.append(entry)
            elif reason is not None:  # skipped folders are not descended into: their files are not listed
                skipped.append({"path": rel.as_posix() + ("/" if name in dirs else ""), "reason": reason})
            elif name in names and path.is_file():
                files.append((path, rel.as_posix()))
        # never descend into skipped folders (hidden, metadata) or folder links (os.walk does not follow them)
        dirs[:] = [d for d in dirs if _skip_reason((base / d).relative_to(root).parts) is None]
    files.sort(key=lambda item: item[1])
    skipped.sort(key=lambda item: item["path"])
    return files, skipped


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
    files, skipped = select_source_files(Path(src))
    if not files:
        reasons = (
            f" ({len(skipped)} skipped: {', '.join(sorted({s['reason'] for s in skipped}))})"
            if skipped
            else ""
        )
        raise LandingError(f"{src} holds no files to land{reasons}")
    for entry in skipped:
        log.warning("not landed: %s (%s)", entry["path"], entry["reason"])
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
    manifest = BatchManifest(batch_id, source, license_id, namespace, tuple(described), tuple(skipped))
    body = manifest_bytes(manifest)
    store.write_bytes(
        f"landing/{batch_id}/{MANIFEST_HASH}", (hashlib.sha256(body).hexdigest() + "\n").encode()
    )
    store.write_bytes(layout_manifest(batch_id), body)  # written last: the batch is complete
    return manifest


def manifest_bytes(manifest: BatchManifest) -> bytes:
    return (json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n").encode()


def layout_manifest(batch: str) -> str:
    return f"landing/{batch}/_batch.json"


def list_complete_batches(store: ObjectStore) -> list[str]:
    """Batch ids whose ``_batch.json`` exists, in landing (lexicographic id) order."""
    batches = []
    for entry in store.list("landing"):
        name = entry.rsplit("/", 1)[-1]
        if store.exists(f"landing/{name}/_batch.json"):
            batches.append(name)
    return sorted(batches)


def read_batch_manifest(store: ObjectStore, batch: str) -> BatchManifest:
    """The batch's manifest, refused if its bytes are not the ones committed at landing."""
    rel = layout_manifest(batch)
    if not store.exists(rel):
        raise LandingError(f"batch {batch} is not complete (no {rel})")
    body = store.read_bytes(rel)
    sidecar = f"landing/{batch}/{MANIFEST_HASH}"
    if store.exists(sidecar):
        expected = store.read_bytes(sidecar).decode().strip()
        actual = hashlib.sha256(body).hexdigest()
        if actual != expected:
            raise LandingError(
                f"batch {batch}: {store.uri(rel)} was changed after landing (sha256 {actual[:16]}..., landed as "
                f"{expected[:16]}...). Landed batches are immutable, so its licence, namespace and files stay "
                "as landed; to change them, restore the file and land the data again as a new batch"
            )
    else:
        log.warning(
            "batch %s was landed without %s (older version): its manifest cannot be verified",
            batch,
            MANIFEST_HASH,
        )
    return BatchManifest.from_json(json.loads(body))
