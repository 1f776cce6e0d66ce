"""The unit workers' fork server freezes what it preloaded: workers start with it outside the collector."""

from __future__ import annotations

import gc

from fm_assets.engine.pool import FREEZE_PRELOADED, map_on_workers, preload_modules, spread_over


def test_the_freeze_is_imported_after_everything_else() -> None:
    modules = preload_modules(("fm_assets.stages.unit_worker_preload",))
    assert modules[-2:] == ["fm_assets.stages.unit_worker_preload", FREEZE_PRELOADED]
    assert modules.count(FREEZE_PRELOADED) == 1


def frozen_objects(_: int) -> int:
    return gc.get_freeze_count()


def test_workers_inherit_a_frozen_heap() -> None:
    with spread_over(2):
        counts = map_on_workers(frozen_objects, [0, 1, 2, 3])
    assert min(counts) > 10_000  # the preloaded modules' objects (tens of thousands), not a handful
