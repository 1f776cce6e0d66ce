"""Advisory locks for cross-batch state on a local root (tokenizer pin, catalog commits).

On a local root a lock is ``fcntl.flock`` on ``<root>/locks/<name>.lock``: it serialises processes (and,
since each holder opens its own file description, threads) on one machine and is released by the kernel
when a holder dies (kill -9 included). Remote roots get no file lock: there, Dagster's concurrency pools of
the same names on the assets give each piece of shared state one writer (the instance must limit them to 1).

Names in use: ``tokenizer`` (the pin, side_inputs/tokenizer.py), ``iceberg`` and ``lance`` (the view
commits, datasets/views.py), ``release`` (dataset versions and LATEST.json, defs/release.py).
Stage outputs need no lock: they are content-addressed and written atomically; cross-batch reads wait for
earlier batches instead (``refs.EarlierBatchPending``).
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
    """Hold the exclusive lock ``name`` for the ``with`` block (a no-op on a remote root)."""
    if not store.is_local:
        yield
        return
    path = store.local_path(layout.lock_file(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        log.debug("holding lock %s", path)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
