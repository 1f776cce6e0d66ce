"""Landing batches: create an immutable batch from local files and discover complete batches.

``landing/<batch>/files/<relpath>`` holds the raw files as delivered; ``landing/<batch>/_batch.json``
is written LAST, so its presence means the batch is complete (the sensor relies on that).

What is read from SRC, by one rule each (``select_source_files``); nothing is dropped silently: every
skipped path is recorded with its reason in the manifest (``skipped: [{path, reason[, target]}]``) and
printed by ``fm land``, and the rest lands (only a SRC with nothing left to land is refused):

* symlinks (to files or folders) are never followed: a link whose target leaves SRC is refused
  (``symlink_outside_source``: nothing outside the folder the user named is ever read); a link that stays
  inside is skipped (``symlink_inside_source``): its target lands as itself, once, so no file lands twice
  and no folder loop exists;
* hidden paths (any component starting with ``.``: ``.git/``, ``.env``) and OS metadata (``__MACOSX/``,
  ``Thumbs.db``, ``desktop.ini``) are skipped (``hidden`` / ``os_metadata``; a skipped folder is one entry);
* FIFOs, sockets and devices are skipped (``not_a_regular_file``).

Files are read only through descriptors opened without following links whose device and inode match what
the walk saw, so a path swapped for a link while landing is refused, not followed.

``_batch.sha256`` (written just before ``_batch.json``, which stays the completion marker) holds the sha256
of ``_batch.json``'s bytes; every read verifies it, so a manifest edited after landing (another licence or
namespace) is refused instead of half-applied, and the land stage keys on it. Batches landed before the
sidecar existed are legacy: read unverified, with a warning.

A text file (no NUL byte in its first 4 kB) bigger than ``line_index.INDEX_EVERY`` gets a line index in its
manifest entry (``line_index``: line-aligned chunks with their first line numbers and sha256s), taken in the
read that copies it into the batch: land's plan cuts a big JSONL file into byte-range units from it without
reading the file, and each unit verifies the chunks it reads against it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from fm_assets.engine import spdx
from fm_assets.engine.hashing import copy_stream_with_sha256
from fm_assets.engine.identifiers import (
    IDENTIFIER_PATTERN,
    InvalidIdentifierError,
    check_batch_id,
    check_source_name,
    is_identifier,
)
from fm_assets.engine.line_index import INDEX_EVERY, LineIndex, index_lines
from fm_assets.engine.store import ObjectStore

NAMESPACES = ("cloud", "on_device", "quarantine")
BATCH_ID_PATTERN = IDENTIFIER_PATTERN  # engine/identifiers.py: the one rule for names under the root
OS_METADATA = frozenset({"__MACOSX", "Thumbs.db", "desktop.ini", "Icon\r"})
MANIFEST_HASH = "_batch.sha256"
QUARANTINE = "quarantine"
PROMOTION_RECORD = "compliance/promotions/{batch}.json"  # a reviewer's promotion (fm_assets.compliance)
_CHUNK = 1 << 20
_TEXT_SNIFF_BYTES = 4096  # a file whose first bytes hold no NUL is text: a big one gets a line index

log = logging.getLogger(__name__)
_LEGACY_WARNED: set[tuple[str, str]] = set()


class LandingError(ValueError):
    """A landing request that cannot be accepted; the message says what to fix."""


@dataclass(frozen=True)
class BatchManifest:
    batch: str
    source: str
    license: str
    namespace: str
    # {"path": rel under files/, "sha256", "bytes"[, "line_index": a big text file's, LineIndex.to_json()]}
    files: tuple[dict[str, Any], ...]
    skipped: tuple[dict[str, str], ...] = field(default=())  # {"path", "reason"[, "target"]}: not landed
    sha256: str = field(default="", compare=False)  # of the committed _batch.json bytes ("" before commit)

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
    try:
        check_source_name(source)
    except InvalidIdentifierError as exc:
        raise LandingError(f"--source: {exc}") from None
    if not license_id:
        raise LandingError(
            "a batch needs a licence: pass --license with an SPDX identifier (e.g. CC-BY-SA-4.0, MIT)"
        )
    try:
        spdx.normalize(license_id)
    except spdx.LicenceError as exc:
        raise LandingError(f"--license: {exc}") from None
    if namespace not in NAMESPACES:
        raise LandingError(f"--namespace {namespace!r} is unknown; choose one of {', '.join(NAMESPACES)}")


def _skip_reason(rel_parts: tuple[str, ...]) -> str | None:
    """The one rule for names never landed: OS metadata, then hidden (any component starting with '.')."""
    if any(part in OS_METADATA for part in rel_parts):
        return "os_metadata"
    if any(part.startswith(".") for part in rel_parts):
        return "hidden"
    return None


@dataclass(frozen=True)
class SourceFile:
    """A regular file found inside SRC; (dev, ino, size) pin the very file the walk saw."""

    path: Path
    rel: str
    dev: int
    ino: int
    size: int


def _link_entry(link: Path, rel: str, root: Path) -> dict[str, str]:
    target = Path(os.path.realpath(link))
    inside = target == root or root in target.parents
    return {
        "path": rel,
        "reason": "symlink_inside_source" if inside else "symlink_outside_source",
        "target": target.relative_to(root).as_posix() if inside else str(target),
    }


def select_source_files(src: Path) -> tuple[list[SourceFile], list[dict[str, str]]]:
    """(files to land, skipped paths with reasons) under ``src``; see the module doc.

    ``os.fwalk`` lists each folder through a descriptor opened without following links, so a folder swapped
    for a link during the walk is not entered either."""
    src = Path(src)
    if not src.exists() and not src.is_symlink():
        raise LandingError(f"{src} does not exist")
    root = src.resolve()  # SRC itself may be a link: the user named it
    if not root.is_dir():
        st = root.stat()
        if not stat.S_ISREG(st.st_mode):
            raise LandingError(f"{src} is not a regular file or folder")
        return [SourceFile(root, src.name, st.st_dev, st.st_ino, st.st_size)], []
    files: list[SourceFile] = []
    skipped: list[dict[str, str]] = []
    for folder, dirs, names, dir_fd in os.fwalk(root, follow_symlinks=False):
        base = Path(folder)
        descend = []
        for name in sorted([*dirs, *names]):
            rel = (base / name).relative_to(root).as_posix()
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            reason = _skip_reason(tuple(rel.split("/")))
            if stat.S_ISLNK(st.st_mode):
                skipped.append(_link_entry(base / name, rel, root))
            elif reason is not None:  # a skipped folder is recorded once, its files are not listed
                skipped.append({"path": rel + ("/" if stat.S_ISDIR(st.st_mode) else ""), "reason": reason})
            elif stat.S_ISDIR(st.st_mode):
                descend.append(name)
            elif stat.S_ISREG(st.st_mode):
                files.append(SourceFile(base / name, rel, st.st_dev, st.st_ino, st.st_size))
            else:  # FIFO, socket, device: reading one could block or never end
                skipped.append({"path": rel, "reason": "not_a_regular_file"})
        dirs[:] = descend
    files.sort(key=lambda item: item.rel)
    skipped.sort(key=lambda item: item["path"])
    return files, skipped


@contextlib.contextmanager
def _open_walked(file: SourceFile) -> Iterator[IO[bytes]]:
    """``file`` opened for reading, refused unless it is still the regular file the walk saw: the last
    component is not followed (O_NOFOLLOW) and the opened file's device and inode must match, so a path
    swapped for a link (or behind a swapped folder) after the walk is never read."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(file.path, flags)
    except OSError as exc:
        raise LandingError(f"{file.path} changed while landing ({exc.strerror}); run fm land again") from None
    handle = os.fdopen(fd, "rb")
    with handle:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_size) != (file.dev, file.ino, file.size) or not stat.S_ISREG(
            st.st_mode
        ):
            raise LandingError(f"{file.path} changed while landing (another file now); run fm land again")
        yield handle


def _hash_walked(file: SourceFile) -> str:
    digest = hashlib.sha256()
    with _open_walked(file) as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


class _Tee:
    """A stream that writes every block read from ``source`` to ``sink``."""

    def __init__(self, source: IO[bytes], sink: IO[bytes]) -> None:
        self._source, self._sink = source, sink

    def read(self, size: int, /) -> bytes:
        block = self._source.read(size)
        self._sink.write(block)
        return block


def _copy_into(handle: IO[bytes], out: IO[bytes], size: int, indexed: bool) -> tuple[str, LineIndex | None]:
    """Copy ``handle`` to ``out``: the bytes' sha256, and their line index when ``indexed`` (the digests on
    threads of their own beside the copy)."""
    if indexed:
        return index_lines(_Tee(handle, out), size)
    return copy_stream_with_sha256(handle, out, _CHUNK), None


def _copy_walked(store: ObjectStore, file: SourceFile, rel: str, sha: str) -> LineIndex | None:
    """Copy ``file`` into the store at ``rel`` from the descriptor ``_open_walked`` checked (never by path),
    hashing on the way: bytes that differ from the first read are refused. A text file (no NUL in its first
    4 kB) bigger than one index chunk is line-indexed in the same read (``engine.line_index``): returned for
    its manifest entry, so land cuts it into byte-range units without reading it again."""
    with _open_walked(file) as handle:
        indexed = file.size > INDEX_EVERY and b"\0" not in handle.read(_TEXT_SNIFF_BYTES)
        handle.seek(0)
        if store.is_local:
            with store.local_temp(rel) as tmp:  # removed if the copy fails (a full disk leaves no .tmp)
                with open(tmp, "wb") as out:
                    actual, index = _copy_into(handle, out, file.size, indexed)
                if actual == sha:
                    os.replace(tmp, store.local_path(rel))
        else:
            with store.fs.open(store.uri(rel), "wb") as out:
                actual, index = _copy_into(handle, out, file.size, indexed)
    if actual != sha:
        raise LandingError(f"{file.path} changed while landing (its bytes differ); run fm land again")
    return index


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
    # one spelling per licence (``mit`` -> ``MIT``), so the release policy and the audit group it once
    license_id = spdx.normalize(license_id)
    files, skipped = select_source_files(Path(src))
    if not files:
        reasons = (
            f" ({len(skipped)} skipped: {', '.join(sorted({s['reason'] for s in skipped}))})"
            if skipped
            else ""
        )
        raise LandingError(f"{src} holds no files to land{reasons}")
    if skipped:  # fm land prints them; the manifest keeps every one
        log.info("not landed: %d path(s), listed in _batch.json under 'skipped'", len(skipped))
    for entry in skipped:
        log.debug("not landed: %s (%s)", entry["path"], entry["reason"])
    described = [{"path": f.rel, "sha256": _hash_walked(f), "bytes": f.size} for f in files]
    if batch_id is None:
        stamp = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y%m%dT%H%M%S%fZ")
        content = hashlib.sha256(repr([(f["path"], f["sha256"]) for f in described]).encode()).hexdigest()[:8]
        batch_id = f"{stamp}-{source}-{content}"
    try:
        check_batch_id(batch_id)
    except InvalidIdentifierError as exc:
        raise LandingError(str(exc)) from None
    if store.exists(layout_manifest(batch_id)):
        raise LandingError(f"batch {batch_id} already exists; landing is immutable, pick another id")
    try:
        for file, entry in zip(files, described, strict=True):
            index = _copy_walked(store, file, f"landing/{batch_id}/files/{file.rel}", entry["sha256"])
            if index is not None:
                entry["line_index"] = index.to_json()
        manifest = BatchManifest(batch_id, source, license_id, namespace, tuple(described), tuple(skipped))
        body = manifest_bytes(manifest)
        store.write_bytes(
            f"landing/{batch_id}/{MANIFEST_HASH}", (hashlib.sha256(body).hexdigest() + "\n").encode()
        )
        store.write_bytes(layout_manifest(batch_id), body)  # written last: the batch is complete
    except BaseException:
        with contextlib.suppress(Exception):  # a batch never completed is removed (a full disk, a lost store)
            if not store.exists(layout_manifest(batch_id)):
                store.delete(f"landing/{batch_id}")
        raise
    return replace(manifest, sha256=hashlib.sha256(body).hexdigest())


def manifest_bytes(manifest: BatchManifest) -> bytes:
    return (json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n").encode()


def layout_manifest(batch: str) -> str:
    return f"landing/{batch}/_batch.json"


def list_complete_batches(store: ObjectStore) -> list[str]:
    """Batch ids whose ``_batch.json`` exists, in landing (lexicographic id) order. A folder whose name is not
    a valid batch id (put there by hand or by another tool) is never a batch: it is logged and left alone."""
    batches = []
    for entry in store.list("landing"):
        name = entry.rsplit("/", 1)[-1]
        if not is_identifier(name):
            log.warning("landing/%r is not a valid batch id: ignored", name)
            continue
        if store.exists(f"landing/{name}/_batch.json"):
            batches.append(name)
    return sorted(batches)


def read_batch_manifest(store: ObjectStore, batch: str) -> BatchManifest:
    """The batch's manifest, refused if its bytes are not the ones committed at landing (``_batch.sha256``).

    A batch landed before the sidecar existed (legacy) is read unverified, with a warning once per process."""
    try:
        check_batch_id(batch)
    except InvalidIdentifierError as exc:
        raise LandingError(str(exc)) from None
    rel = layout_manifest(batch)
    if not store.exists(rel):
        raise LandingError(f"batch {batch} is not complete (no {rel})")
    body = store.read_bytes(rel)
    actual = hashlib.sha256(body).hexdigest()
    sidecar = f"landing/{batch}/{MANIFEST_HASH}"
    if store.exists(sidecar):
        expected = store.read_bytes(sidecar).decode(errors="replace").strip()
        if actual != expected:
            raise LandingError(
                f"batch {batch}: {store.uri(rel)} was changed after landing (sha256 {actual}, landed as "
                f"{expected} in {MANIFEST_HASH}). Landed batches are immutable: its licence, namespace and files "
                "stay as landed. Restore the original _batch.json, and to change them land the data again as a "
                "new batch (fm land)"
            )
    elif (store.root, batch) not in _LEGACY_WARNED:
        _LEGACY_WARNED.add((store.root, batch))
        log.warning(
            "batch %s was landed without %s (older version): its manifest cannot be verified",
            batch,
            MANIFEST_HASH,
        )
    return replace(BatchManifest.from_json(json.loads(body)), sha256=actual)


def held_for_review(store: ObjectStore, batch: str) -> bool:
    """Whether ``batch`` was landed in quarantine and no reviewer has promoted it: it is not processed, so
    cross-batch state (earlier-batch indexes, the tokenizer's training batch) must not wait for it. The
    promotion itself is checked where it is used (``fm_assets.compliance.namespaces``)."""
    if not store.exists(layout_manifest(batch)):
        return False
    manifest = BatchManifest.from_json(json.loads(store.read_bytes(layout_manifest(batch))))
    return manifest.namespace == QUARANTINE and not store.exists(PROMOTION_RECORD.format(batch=batch))
