"""Import modules (or do other preparatory work, ``start_in_background``) on a daemon thread while the caller
does other work.

`fm run` runs the preprocess job and then the release job in one process. The release's libraries
(pyiceberg, ~0.65 s to import) are imported lazily so that the code location and unit workers start light;
importing them once the preprocess run's driver waits on its unit workers (``pool.when_driver_waits``) takes
that time off the end of the run instead of adding it there; module by module, each one started only while
the driver waits (``pool.pace_with_driver``), so that an import holds the GIL while the driver is idle, not
while it checks a stage's output or writes Dagster's events. With one worker the units run in the driver and
there is no idle time to fill, so the libraries are imported where the release needs them, as before.

Python's per-module import locks make a concurrent *import* safe: the release step that imports the same module
first waits for this thread to finish it. They do not protect a library that another thread is already using
and whose import registers hooks into it: pyiceberg's SQL catalog imports ``sqlalchemy.orm``, which registers
an inspection hook into SQLAlchemy core; Dagster's event writes on the main thread called that hook while
``sqlalchemy.orm.exc`` was still half-imported and the stage failed (``partially initialized module``, seen
once on a 107 MB batch). Such modules go in ``first_here``: imported on the calling thread before the others
start on the background one.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence

log = logging.getLogger(__name__)


def import_in_background(
    modules: Sequence[str], first_here: Sequence[str] = (), pace: Callable[[], object] | None = None
) -> threading.Thread:
    """Import ``first_here`` on this thread, then start importing ``modules`` (in order) on a daemon thread,
    calling ``pace`` before each (``pool.pace_with_driver``: only while the driver is idle); a module that
    fails to import is logged and skipped (the code that needs it raises the real error where it imports it)."""
    for name in first_here:
        try:
            importlib.import_module(name)
        except Exception as exc:
            log.debug("import of %s failed: %s", name, exc)

    def run() -> None:
        for name in modules:
            if pace is not None:
                pace()
            try:
                importlib.import_module(name)
            except Exception as exc:  # an optional library that is not installed: its user reports it
                log.debug("background import of %s failed: %s", name, exc)

    return start_in_background("fm-background-imports", run)


def start_in_background(name: str, work: Callable[[], object]) -> threading.Thread:
    """Run ``work`` on a daemon thread named ``name``; a failure is logged (at debug) and not raised: what the
    work prepares ahead is made again, and any error reported, where it is needed."""

    def run() -> None:
        try:
            work()
        except Exception as exc:
            log.debug("%s: %s", name, exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread
