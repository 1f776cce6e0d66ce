"""Object store: one code path for a local folder and for S3 (or any fsspec URI).

Every path a stage uses is relative to the store root (``FM_ROOT``). Writes are atomic: a local
write goes to a temporary name and is renamed; an S3 PUT is atomic per object. Commit markers are
written last so a reader never sees half a unit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.hashing import copy_with_sha256, sha256_file
from fm_assets.engine.identifiers import check_relative
from fm_assets.engine.storage_errors import StorageUnavailableError, redact, translate_storage_error

__all__ = [
    "ObjectStore",
    "StorageUnavailableError",
    "UnreadableFileError",
    "iter_parquet_batches",
    "redact",
    "sha256_file",
]


class ObjectStore:
    """Relative-path file operations on top of an fsspec filesystem rooted at ``root``."""

    def __init__(self, root: str, storage_options: dict[str, Any] | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        protocol = root.split("://", 1)[0] if "://" in root else "file"
        self.is_local = protocol in ("file", "local")
        if self.is_local:
            root = str(Path(root.removeprefix("file://")).expanduser().resolve())
        self.root = root.rstrip("/")
        self.fs = fsspec.filesystem(protocol, **self.storage_options)

    # -- naming ---------------------------------------------------------------------------------
    def uri(self, rel: str) -> str:
        """The full URI of ``rel``; a path that would leave the root (``..``) is refused, whoever built it."""
        return f"{self.root}/{check_relative(rel).lstrip('/')}" if rel else self.root

    def local_path(self, rel: str) -> Path:
        """The local filesystem path of ``rel``; only valid for a local store."""
        if not self.is_local:
            raise ValueError(f"store {self.root} is not local; use open()/get_file() instead")
        return Path(self.uri(rel))

    @property
    def endpoint(self) -> str:
        """Where the store lives, safe to print (no credentials)."""
        endpoint = self.storage_options.get("client_kwargs", {}).get("endpoint_url")
        where = redact(self.root)
        return f"{where} at {redact(endpoint)}" if endpoint else where

    def unavailable(self, exc: BaseException, what: str) -> StorageUnavailableError:
        """``exc`` (raised trying to ``what`` this store) as a message naming the endpoint, never a secret."""
        options = self.storage_options
        return translate_storage_error(
            exc,
            where=self.endpoint,
            what=what,
            endpoint_url=str(options.get("client_kwargs", {}).get("endpoint_url") or ""),
            secrets=[str(options[name]) for name in ("key", "secret", "token") if options.get(name)],
        )

    def check_reachable(self) -> None:
        """Fail fast with a clear message when a remote store cannot be reached or its bucket is missing."""
        if self.is_local:
            return
        bucket = self.fs._strip_protocol(self.root).split("/", 1)[0]
        try:
            self.fs.ls(bucket, refresh=True)
        except FileNotFoundError:
            raise StorageUnavailableError(
                f"bucket {bucket!r} does not exist at {self.endpoint}; create it or fix FM_ROOT"
            ) from None
        except Exception as exc:
            raise self.unavailable(exc, "reach") from None

    # -- reads ----------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists; a store that cannot answer raises ``StorageUnavailableError`` (fsspec's own
        ``exists`` returns False on any error, which made an unreachable store look empty)."""
        if self.is_local:
            return os.path.exists(self.uri(rel))
        try:
            self.fs.info(self.uri(rel))
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise self.unavailable(exc, f"look up {redact(rel)} in") from None
        return True

    def open(self, rel: str, mode: str = "rb") -> IO[Any]:
        if "w" in mode or "a" in mode:
            raise ValueError("use write_bytes/write_file for writes (they are atomic)")
        return self.fs.open(self.uri(rel), mode)

    def read_bytes(self, rel: str) -> bytes:
        with self.open(rel) as handle:
            return handle.read()

    def read_json(self, rel: str) -> Any:
        return json.loads(self.read_bytes(rel))

    def list(self, prefix: str) -> list[str]:
        """Relative paths of the files directly under ``prefix`` (sorted; empty if missing)."""
        base = self.uri(prefix)
        if not self.fs.exists(base):
            return []
        found = (
            self.fs.ls(base, detail=False, refresh=True)
            if not self.is_local
            else self.fs.ls(base, detail=False)
        )
        root = self.fs._strip_protocol(self.root)
        rels = []
        for entry in found:
            entry = self.fs._strip_protocol(entry)
            rels.append(entry[len(root) :].lstrip("/"))
        return sorted(rels)

    def sizes_under(self, prefix: str) -> dict[str, int]:
        """``{path relative to prefix: size}`` of every file below ``prefix`` (one listing; hidden names,
        i.e. a writer's temporary files, left out). Empty when ``prefix`` does not exist."""
        base = self.uri(prefix).rstrip("/")
        if self.is_local:
            root = Path(base)
            if not root.is_dir():
                return {}
            return {
                path.relative_to(root).as_posix(): path.stat().st_size
                for path in root.rglob("*")
                if path.is_file() and not path.name.startswith(".")
            }
        stripped = self.fs._strip_protocol(base).rstrip("/")
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return {}
        sizes = {}
        for path, info in found.items():
            name = self.fs._strip_protocol(path)[len(stripped) :].lstrip("/")
            if name and not name.rsplit("/", 1)[-1].startswith(".") and info.get("type") != "directory":
                sizes[name] = int(info.get("size") or 0)
        return sizes

    def sha256(self, rel: str) -> str:
        """sha256 of ``rel``'s bytes, streamed (no local copy of a remote file)."""
        digest = hashlib.sha256()
        with self.open(rel) as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        return digest.hexdigest()

    def size(self, rel: str) -> int:
        return int(self.fs.size(self.uri(rel)))

    @contextlib.contextmanager
    def local_copy(self, rel: str) -> Iterator[Path]:
        """A local path holding ``rel``: the file itself when local, else a temporary download."""
        if self.is_local:
            yield self.local_path(rel)
            return
        with tempfile.TemporaryDirectory(prefix="fm-get-") as tmp:
            dest = Path(tmp) / Path(rel).name
            self.fs.get(self.uri(rel), str(dest))
            yield dest

    # -- writes ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def local_temp(self, rel: str) -> Iterator[Path]:
        """A hidden temporary name beside ``rel`` on a local root, to write and ``os.replace`` onto it; removed
        when the block fails (a full disk leaves no ``.tmp`` behind)."""
        target = self.local_path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            yield tmp
        finally:
            tmp.unlink(missing_ok=True)  # gone already once it was renamed onto the target

    def write_bytes(self, rel: str, data: bytes) -> None:
        if self.is_local:
            with self.local_temp(rel) as tmp:
                with open(tmp, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.local_path(rel))
        else:
            self.fs.pipe_file(self.uri(rel), data)

    def write_json(self, rel: str, obj: Any) -> None:
        self.write_bytes(rel, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())

    def put_file(self, local: str | Path, rel: str) -> None:
        """Copy a finished local file into the store atomically."""
        if self.is_local:
            with self.local_temp(rel) as tmp:
                shutil.copyfile(local, tmp)
                os.replace(tmp, self.local_path(rel))
        else:
            self.fs.put_file(str(local), self.uri(rel))

    def put_file_hashed(self, local: str | Path, rel: str, expected: str) -> str:
        """Copy a local file into the store, published (atomically) only when its sha256 is ``expected``;
        returns the sha256 of the bytes read. On a local root the file is read once, hashed while copied."""
        if self.is_local:
            # built in the root's scratch area (same filesystem): bytes that are refused leave no folder
            with self.staging_dir() as staging:
                actual = copy_with_sha256(local, staging / "copy")
                if actual == expected:
                    target = self.local_path(rel)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(staging / "copy", target)
            return actual
        actual = sha256_file(local)
        if actual == expected:
            self.fs.put_file(str(local), self.uri(rel))
        return actual

    def put_dir(self, local_dir: str | Path, rel: str, *, last: str | None = None) -> None:
        """Copy a local folder tree into the store; ``last`` (a file name at the top) is written after the rest."""
        local_dir = Path(local_dir)
        files = sorted(p for p in local_dir.rglob("*") if p.is_file())
        files.sort(key=lambda p: p.relative_to(local_dir).as_posix() == last)
        for path in files:
            self.put_file(path, f"{rel}/{path.relative_to(local_dir).as_posix()}")

    def get_dir(self, rel: str, local_dir: str | Path) -> Path:
        """Download the folder ``rel`` to ``local_dir`` (returns it)."""
        local_dir = Path(local_dir)
        base = self.fs._strip_protocol(self.uri(rel)).rstrip("/")
        for remote in self.fs.find(self.uri(rel)):
            remote = self.fs._strip_protocol(remote)
            target = local_dir / remote[len(base) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(
                remote if self.is_local else f"{self.root.split('://')[0]}://{remote}", str(target)
            )
        return local_dir

    def delete(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.rm(self.uri(rel), recursive=True)

    @contextlib.contextmanager
    def staging_dir(self) -> Iterator[Path]:
        """A local scratch folder for building files before they are put into the store."""
        base = self.local_path(".tmp") if self.is_local else None
        if base is not None:
            base.mkdir(parents=True, exist_ok=True)
        # the pid in the name lets clean_stale_staging() tell a killed run's leftovers from live work
        with tempfile.TemporaryDirectory(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=base) as tmp:
            yield Path(tmp)

    def clean_stale_staging(self) -> int:
        """Remove scratch folders of processes on this machine that died (kill -9) before cleaning up."""
        if not self.is_local:
            return 0
        removed = 0
        base = self.local_path(".tmp")
        for folder in base.glob(f"{STAGING_PREFIX}*") if base.is_dir() else ():
            pid_text = folder.name.removeprefix(STAGING_PREFIX).split("-", 1)[0]
            if pid_text.isdigit() and _process_alive(int(pid_text)):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
        return removed


STAGING_PREFIX = "fm-stage-"


def open_store(root: str, s3_endpoint_url: str | None = None, s3_region: str | None = None) -> ObjectStore:
    """The store at ``root`` (a local folder or s3://bucket/prefix; an S3-compatible endpoint and region for
    the latter). Every process opens it through here: the Dagster resource and, before Dagster is imported,
    ``fm`` itself."""
    options: dict[str, Any] = {}
    if root.startswith("s3://"):
        client_kwargs: dict[str, Any] = {}
        if s3_endpoint_url:
            client_kwargs["endpoint_url"] = s3_endpoint_url
        if s3_region:
            client_kwargs["region_name"] = s3_region
        options = {"client_kwargs": client_kwargs, "skip_instance_cache": True}
    return ObjectStore(root, options)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class UnreadableFileError(RuntimeError):
    """A stored file cannot be decoded (damaged page, truncated footer, ...); the message names it."""


def unreadable(store: ObjectStore, rel: str, exc: BaseException) -> UnreadableFileError:
    where = layout.stage_output_of(rel)
    hint = (
        f"recompute it with `fm repair {where[1]} --stage {where[0]}`"
        if where
        else "restore it, or re-land the data it came from"
    )
    return UnreadableFileError(f"{store.uri(rel)} cannot be read ({type(exc).__name__}: {exc}); {hint}")


def iter_parquet_batches(
    store: ObjectStore, rel: str, columns: list[str] | None = None, batch_size: int = 2048
) -> Iterator[pa.RecordBatch]:
    """Stream a Parquet file from the store in bounded record batches, verifying page checksums where the
    writer stored them; a damaged or truncated file raises ``UnreadableFileError`` naming it."""
    try:
        with store.open(rel) as handle:
            reader = pq.ParquetFile(handle, page_checksum_verification=True)
            yield from reader.iter_batches(batch_size=batch_size, columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(store, rel, exc) from exc


def read_parquet_tables(
    store: ObjectStore, rels: list[str], columns: list[str] | None = None, threads: int = 4
) -> list[pa.Table]:
    """Whole Parquet files from the store, several at a time (a driver reading one column of every part):
    on a local root Arrow opens each path itself, without a Python file object in the way; a damaged or
    truncated file raises ``UnreadableFileError`` naming it."""

    def read(rel: str) -> pa.Table:
        try:
            if store.is_local:
                return pq.read_table(store.local_path(rel), columns=columns, use_threads=False)
            with store.open(rel) as handle:
                return pq.read_table(handle, columns=columns, use_threads=False)
        except (OSError, pa.ArrowException) as exc:
            raise unreadable(store, rel, exc) from exc

    if len(rels) < 2:
        return [read(rel) for rel in rels]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(read, rels))
