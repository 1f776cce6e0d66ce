"""Advisory locks for cross-batch state on a local root (tokenizer pin, catalog commits).

On a local root a lock is ``fcntl.flock`` on ``<root>/locks/<name>.lock``: it serialises processes (and,
since each holder opens its own file description, threads) on one machine and is released by the kernel
when a holder dies (kill -9 included). Remote roots get no file lock: there, Dagster's concurrency pools of
the same names on the assets give each piece of shared state one writer (the instance must limit them to 1).

Names in use: ``tokenizer`` (the pin, side_inputs/tokenizer.py), ``iceberg`` and ``lance`` (the view
commits, datasets/views.py), ``release`` (dataset versions and LATEST.json, defs/release.py), and ``run-<batch>``
(one ``fm run`` / ``fm repair`` per batch at a time: ``batch_run_locks``, which says who holds it).
Stage outputs need no lock: they are content-addressed and written atomically; cross-batch reads wait for
earlier batches instead (``refs.EarlierBatchPending``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator

from fm_assets.engine import layout
from fm_assets.engine.identifiers import check_batch_id
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


class RootBusyError(RuntimeError):
    """Another run holds a batch this run needs; the message says which, who and since when."""


def _holder_text(path_text: str) -> str:
    try:
        holder = json.loads(path_text)
        return f"pid {holder['pid']} on {holder['host']} ({holder['command']}) since {holder['since']}"
    except (ValueError, KeyError, TypeError):
        return "an unknown process"


@contextlib.contextmanager
def batch_run_locks(
    store: ObjectStore, batches: list[str], *, wait: bool = False, poll_seconds: float = 2.0
) -> Iterator[None]:
    """Hold the run lock of every batch in ``batches`` (``fm run`` / ``fm repair``): runs of different batches
    overlap freely, a second run of a batch already running waits (``wait``) or raises ``RootBusyError``
    naming the holder. Locks are taken in sorted order (no deadlock) and dropped by the kernel when their
    holder dies, so a kill -9 never leaves one behind. On a remote root this is a no-op (runs go through the
    Dagster run queue there)."""
    for batch in batches:  # before any lock file is opened: a batch id never names a path outside locks/
        check_batch_id(batch)
    if not store.is_local:
        yield
        return
    with contextlib.ExitStack() as held:
        for batch in sorted(set(batches)):
            held.enter_context(_one_lock(store, f"run-{batch}", batch, wait, poll_seconds))
        yield


@contextlib.contextmanager
def _one_lock(store: ObjectStore, name: str, batch: str, wait: bool, poll_seconds: float) -> Iterator[None]:
    path = store.local_path(layout.lock_file(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        announced = False
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                handle.seek(0)
                holder = _holder_text(handle.read())
                if not wait:
                    raise RootBusyError(
                        f"another run holds batch {batch} of {store.root}: {holder}. Wait for it to finish, pass "
                        "--wait to queue behind it, or stop it (a killed run releases the lock at once)"
                    ) from None
                if not announced:
                    log.warning("waiting for the run that holds batch %s: %s", batch, holder)
                    announced = True
                time.sleep(poll_seconds)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv[:3]) or "python",
            "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }))  # fmt: skip
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
