"""The landing sensor registers a quarantine batch but runs it only after a recorded promotion, never after a
rejection, and says why it skips it."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from dagster import DagsterInstance, SensorResult, build_sensor_context

from fm_assets.compliance.promotions import promote, reject
from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME
from fm_assets.defs.resources.object_store import ObjectStoreResource
from fm_assets.defs.sensors import LandingCursor, landing_batch_sensor


def _tick(instance: DagsterInstance, root: Path, cursor: str | None) -> SensorResult:
    context = build_sensor_context(
        instance=instance, resources={"store": ObjectStoreResource(root=str(root))}, cursor=cursor
    )
    result = cast(SensorResult, landing_batch_sensor(context))
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, list(request.partition_keys))
    return result


def test_quarantine_batches_wait_for_review_in_the_sensor(store, land, tmp_path):
    cloud = land("docs")
    waiting = land("forum", namespace="quarantine")
    doomed = land("spam", namespace="quarantine")
    with DagsterInstance.ephemeral() as instance:
        first = _tick(instance, Path(store.root), None)
        assert [r.partition_key for r in first.run_requests or []] == [cloud]
        assert set(instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME)) == {cloud, waiting, doomed}
        assert LandingCursor.parse(first.cursor).review == [waiting, doomed]

        idle = _tick(instance, Path(store.root), first.cursor)
        assert idle.run_requests == []  # still waiting: nothing requested twice, nothing run

        promote(store, waiting, to="cloud", reviewer="jane", reason="ok")
        reject(store, doomed, reviewer="jane", reason="spam")
        after = _tick(instance, Path(store.root), idle.cursor)
        assert [r.partition_key for r in after.run_requests or []] == [waiting]
        assert LandingCursor.parse(after.cursor).review == []  # the rejected one is dropped for good
        assert _tick(instance, Path(store.root), after.cursor).run_requests == []
