"""``fm repair``: recompute exactly what is damaged in one batch's stage outputs, and restore damaged CAS
objects from their landed copies.

For each stage (in graph order, or the one named), the current output is checked with full sha256. The units
owning damaged files lose their marker and damaged files; ``_SUCCESS.json`` goes too, so the next run of
that batch resumes the output: intact units are kept, damaged ones recomputed (the executor's purity check
compares any leftover file with the recomputed one). Stages are pure, so the repaired output has the same
data version and everything downstream stays a cache hit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_file
from fm_assets.engine.integrity import check_output, units_owning
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.refs import read_ref, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import ALL_STAGE_NAMES

log = logging.getLogger(__name__)


@dataclass
class RepairPlan:
    batch: str
    damaged: dict[str, list[str]] = field(default_factory=dict)  # stage -> damaged paths
    units: dict[str, list[str]] = field(default_factory=dict)  # stage -> units to recompute
    data_versions: dict[str, str] = field(default_factory=dict)  # stage -> data version before repair

    @property
    def needed(self) -> bool:
        return bool(self.damaged)


def plan_and_reset(store: ObjectStore, batch: str, stages: list[str]) -> RepairPlan:
    """Find damage in ``batch``'s outputs of ``stages`` and reset the damaged units so a run recomputes them."""
    plan = RepairPlan(batch)
    for stage in stages:
        ref = read_ref(store, stage, batch)
        if ref is None:
            continue
        try:
            success = read_success_at(store, ref.prefix)
        except (OSError, ValueError, TypeError):  # the commit record itself is damaged: resume the output
            plan.damaged[stage] = [layout.success_marker(ref.prefix)]
            plan.units[stage] = ["<_SUCCESS.json>"]
            plan.data_versions[stage] = ref.data_version
            store.delete(layout.success_marker(ref.prefix))
            continue
        damage = check_output(store, success, full=True)
        if not damage:
            continue
        units, outside = units_owning(store, success, damage)
        plan.damaged[stage] = [d.path for d in damage]
        plan.units[stage] = units if not outside else [*units, "<complete() artifacts>"]
        plan.data_versions[stage] = success.data_version
        for unit in units:
            store.delete(layout.unit_marker(success.prefix, unit))
        for d in damage:
            store.delete(d.path)
        store.delete(
            layout.success_marker(success.prefix)
        )  # the output is incomplete again: a run resumes it
        log.warning("%s[%s]: %d damaged files, recomputing units %s", stage, batch, len(damage), units)
    return plan


def repair_cas(store: ObjectStore) -> list[str]:
    """Restore every CAS object whose bytes do not hash to its name from an intact landed copy."""
    landed: dict[str, str] = {}
    for batch in list_complete_batches(store):
        for entry in read_batch_manifest(store, batch).files:
            landed.setdefault(entry["sha256"], layout.landed_file(batch, entry["path"]))
    restored = []
    for shard in store.list("cas"):
        for rel in store.list(shard):
            name = rel.rsplit("/", 1)[-1]
            if store.sha256(rel) == name:
                continue
            source = landed.get(name)
            if source is None:
                log.error("CAS object %s is damaged and no landed file has its bytes", rel)
                continue
            with store.local_copy(source) as local:
                if sha256_file(local) != name:
                    log.error("CAS object %s is damaged and its landed copy %s too", rel, source)
                    continue
                store.put_file(local, rel)
            restored.append(rel)
    return restored


def stages_to_check(stage: str | None) -> list[str]:
    if stage is None:
        return list(ALL_STAGE_NAMES)
    if stage not in ALL_STAGE_NAMES:
        raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(ALL_STAGE_NAMES)}")
    return [stage]
