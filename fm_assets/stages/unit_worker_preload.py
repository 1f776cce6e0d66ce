"""Imported by the unit workers' fork server before it forks a worker: every stage module and the libraries
the stages' units use (``Stage.worker_modules``), so that each worker starts with them imported.

``fm run`` starts the fork server before it imports Dagster and builds the definitions (``cli.head_start``), when
it has not imported the stages yet; naming this one module in the server's preload list loads them there.
"""

from __future__ import annotations

from importlib import import_module

from fm_assets.stages.registry import MEDIA_STAGES, TEXT_STAGES

for _stage in (*TEXT_STAGES, *MEDIA_STAGES):
    for _module in _stage.worker_modules:
        import_module(_module)
