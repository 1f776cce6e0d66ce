"""Where shard bytes come from: local files directly, remote URIs (fsspec: s3://, gs://, ...) through a local
cache folder with a size budget and least-recently-used eviction."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import posixpath
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fsspec.core import OpenFile

logger = logging.getLogger(__name__)


def is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


def local_path(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def resolve_uri(base: str, path: str) -> str:
    """Resolve ``path`` against the folder of the file ``base`` unless it is absolute or a URI."""
    if "://" in path or os.path.isabs(path) or not base:
        return path
    if is_remote(base):
        scheme, rest = base.split("://", 1)
        return f"{scheme}://" + posixpath.normpath(posixpath.join(posixpath.dirname(rest), path))
    return os.path.normpath(os.path.join(os.path.dirname(local_path(base)), path))


def _open_remote(uri: str, mode: str, storage_options: dict[str, Any] | None) -> OpenFile:
    """``fsspec.open`` for one remote URI, with an install hint when the scheme's filesystem is missing."""
    import fsspec

    try:
        opened = fsspec.open(uri, mode, **(storage_options or {}))
    except ImportError as exc:  # fsspec knows the scheme but its implementation (s3fs, gcsfs, ...) is absent
        hint = " (pip install 'fm-data-platform[s3]')" if uri.startswith(("s3://", "s3a://")) else ""
        raise ImportError(f"cannot open {uri}: {exc}{hint}") from exc
    if not isinstance(opened, fsspec.core.OpenFile):  # one URL always gives one OpenFile
        raise TypeError(f"fsspec.open({uri!r}) returned {type(opened).__name__}, not an OpenFile")
    return opened


def read_bytes(uri: str, storage_options: dict[str, Any] | None = None) -> bytes:
    """Read a whole file.

    Args:
        uri: A local path, a ``file://`` URI or a remote URI that fsspec understands (``s3://``, ``gs://``, ...).
        storage_options: Passed to fsspec for remote URIs, e.g. ``{"client_kwargs": {"endpoint_url": ...}}``.

    Returns:
        The file's bytes.

    Raises:
        FileNotFoundError: The file does not exist.
        ImportError: The URI's fsspec filesystem is not installed (``s3://`` needs the ``s3`` extra).
    """
    if is_remote(uri):
        with _open_remote(uri, "rb", storage_options) as f:
            return f.read()
    with open(local_path(uri), "rb") as f:
        return f.read()


def write_bytes_atomic(uri: str, data: bytes, storage_options: dict[str, Any] | None = None) -> None:
    """Write to a temporary name, then rename (local) or a single PUT (object stores are atomic per object)."""
    if is_remote(uri):
        with _open_remote(uri, "wb", storage_options) as f:
            f.write(data)
        return
    path = local_path(uri)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@dataclass
class CacheStats:
    """Counters of a :class:`ShardCache`. ``hits``/``misses``/``wait_s`` count readers' lookups (a reader that
    finds a download in flight waits for it and counts a miss); files fetched ahead by a prewarm count in
    ``prewarmed`` and ``bytes_downloaded`` only."""

    hits: int = 0
    misses: int = 0
    bytes_downloaded: int = 0
    evictions: int = 0
    wait_s: float = 0.0  # time readers spent waiting for downloads
    prewarmed: int = 0  # files downloaded ahead of their readers

    def plus(self, other: CacheStats) -> CacheStats:
        return CacheStats(
            self.hits + other.hits,
            self.misses + other.misses,
            self.bytes_downloaded + other.bytes_downloaded,
            self.evictions + other.evictions,
            self.wait_s + other.wait_s,
            self.prewarmed + other.prewarmed,
        )

    def add(self, delta: dict[str, float]) -> None:
        """Add counters sent back by a worker process (see :func:`fm_loader.metrics.cache_delta`)."""
        for key, value in delta.items():
            setattr(self, key, getattr(self, key) + value)


class ShardCache:
    """Local copies of remote files, bounded by ``budget_bytes``; the least recently used go first.

    Files currently pinned (open by a reader) are never evicted. Local URIs pass through untouched.
    ``storage_options`` are handed to fsspec for every remote read, for example
    ``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}}`` for an S3-compatible server.
    """

    def __init__(
        self,
        folder: str | None = None,
        budget_bytes: int = 64 << 30,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.folder = folder or os.path.join(tempfile.gettempdir(), "fm_loader_cache")
        self.budget_bytes = budget_bytes
        self.storage_options = dict(storage_options or {})
        self.stats = CacheStats()
        self._lru: OrderedDict[str, int] = OrderedDict()  # local path -> size
        self._pins: dict[str, int] = {}
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Event] = {}

    def _cache_path(self, uri: str) -> str:
        digest = hashlib.sha256(uri.encode()).hexdigest()[:24]
        return os.path.join(self.folder, digest[:2], f"{digest}-{posixpath.basename(uri)}")

    def get(self, uri: str, pin: bool = False, ahead: bool = False) -> str:
        """Local path of ``uri``, downloading it first if it is remote and not cached.

        Args:
            uri: Local path or remote URI.
            pin: Keep the file from eviction until :meth:`unpin` (one unpin per pinned get).
            ahead: A prewarm fetching before any reader needs the file: counted in ``prewarmed``, not as a
                reader's hit, miss or wait.
        """
        if not is_remote(uri):
            return local_path(uri)
        path = self._cache_path(uri)
        t0 = time.monotonic()
        waited = False
        while True:
            with self._lock:
                if path in self._lru or os.path.exists(path):
                    if not ahead:  # a reader that waited on someone else's download missed
                        if waited:
                            self.stats.misses += 1
                            self.stats.wait_s += time.monotonic() - t0
                        else:
                            self.stats.hits += 1
                    self._lru[path] = self._lru.pop(path, None) or os.path.getsize(path)
                    if pin:
                        self._pins[path] = self._pins.get(path, 0) + 1
                    return path
                event = self._inflight.get(path)
                if event is None:
                    event = self._inflight[path] = threading.Event()
                    break
            event.wait()
            waited = True
        try:
            data = read_bytes(uri, self.storage_options)
            with self._lock:
                self._make_room(len(data))
            write_bytes_atomic(path, data)
            with self._lock:
                if ahead:
                    self.stats.prewarmed += 1
                else:
                    self.stats.misses += 1
                    self.stats.wait_s += time.monotonic() - t0
                self.stats.bytes_downloaded += len(data)
                self._lru[path] = len(data)
                if pin:
                    self._pins[path] = self._pins.get(path, 0) + 1
            logger.debug("cached %s (%d bytes)", uri, len(data))
            return path
        finally:
            with self._lock:
                self._inflight.pop(path).set()

    def unpin(self, path: str) -> None:
        with self._lock:
            if path in self._pins:
                self._pins[path] -= 1
                if self._pins[path] <= 0:
                    del self._pins[path]

    def _make_room(self, incoming: int) -> None:
        used = sum(self._lru.values())
        for victim in list(self._lru):
            if used + incoming <= self.budget_bytes:
                break
            if victim in self._pins:
                continue
            used -= self._lru.pop(victim)
            self.stats.evictions += 1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(victim)

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return sum(self._lru.values())
