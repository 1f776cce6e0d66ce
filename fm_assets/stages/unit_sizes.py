"""How finely the land stages cut a batch into units: the settings' sizes, or smaller for a smaller batch.

``land_unit_bytes`` (8 MB) and ``land_part_bytes`` (4 MB) suit a big batch: a 1 TB one is ~250,000 units per
stage. A 100 MB batch at those sizes is ~26 units, which leaves a 16-core host two waves per stage, the
second one short, and a stage's wall is then set by its slowest units. So the sizes shrink until the batch
is at least ``batch_units`` units, but not below ``MIN_UNIT_BYTES``, under which a unit costs more (a task,
a marker, its own output files) than spreading it saves. The sizes depend on the batch's bytes and the
settings only: never on the worker count, so the bytes written do not either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fm_assets.settings import PipelineSettings

MIN_UNIT_BYTES = 1 << 20


@dataclass(frozen=True)
class UnitSizes:
    unit_bytes: int  # landed bytes per land unit (and per range of a big JSONL file)
    part_bytes: int  # text bytes per land part: one unit of every later text stage


def unit_sizes(batch_bytes: int, settings: PipelineSettings) -> UnitSizes:
    """The sizes for a batch of ``batch_bytes`` landed bytes (a setting already below ``MIN_UNIT_BYTES`` is
    kept as it is: tests use one-byte units)."""
    spread = max(MIN_UNIT_BYTES, math.ceil(batch_bytes / settings.batch_units))
    return UnitSizes(min(settings.land_unit_bytes, spread), min(settings.land_part_bytes, spread))
