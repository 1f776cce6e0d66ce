"""What `fm run` starts before it imports Dagster: the unit workers.

Importing Dagster, opening the instance and setting up a run take about a second here (two on a slower
core) before the first stage step starts. ``warm_unit_workers`` starts the workers' fork server before that,
so that it imports the stage modules on another core meanwhile and land's units find the workers running.
Nothing here imports Dagster (the store opens through ``store.open_store``).
"""

from __future__ import annotations

from fm_assets.engine.landing import read_batch_manifest
from fm_assets.engine.pool import resolve_workers, start_fork_server, start_workers
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import Settings

# what the fork server imports when it starts before this process imported the stages
UNIT_WORKER_PRELOAD = ("fm_assets.stages.unit_worker_preload",)
_WARMED: set[int] = set()  # worker counts whose pool this process has started ahead of its first stage


def warm_unit_workers(settings: Settings, store: ObjectStore, batches: list[str]) -> bool:
    """Start the unit workers' fork server and workers now when a batch will need worker processes (several
    workers, and more landed bytes than one part holds, so its stages have several units): the server imports
    every stage module (``UNIT_WORKER_PRELOAD``, about a second) and forks the workers while this process
    imports Dagster and sets up the run, instead of inside the first stage with several units. A second call
    is a no-op."""
    workers = resolve_workers(settings.workers)
    if settings.unit_executor != "local" or workers < 2:
        return False
    landed = (sum(int(f["bytes"]) for f in read_batch_manifest(store, batch).files) for batch in batches)
    if not any(size > settings.land_part_bytes for size in landed):
        return False
    if workers not in _WARMED:
        _WARMED.add(workers)
        start_fork_server(UNIT_WORKER_PRELOAD)
        start_workers(workers)
    return True
