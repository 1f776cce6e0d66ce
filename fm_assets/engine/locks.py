"""Advisory locks for cross-batch state on a local root (tokenizer pin, catalog commits).

On a local root a lock is ``fcntl.flock`` on ``<root>/locks/<name>.lock``: it serialises processes on one
machine and is released by the kernel when a holder dies (kill -9 included). Remote roots get no file lock:
there, Dagster's concurrency pools (see ``defs/jobs.py``) give each piece of shared state one writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
from collections.abc import Iterator

from fm_assets.engine import layout
from fm_assets.engine.store import ObjectStore

log = logging.getLogger(__name__)


@contextlib.contextmanager
def store_lock(store: ObjectStore, name: str) -> Iterator[None]:
    if not store.is_local:
        yield
        return
    path = store.local_path(layout.lock_file(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
