"""The landing sensor adds one partition and one run request per new complete batch, idempotently."""

from __future__ import annotations

from dagster import build_sensor_context

from fm_assets.cli.runner import dagster_instance
from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME
from fm_assets.defs.sensors import landing_batch_sensor
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import load_settings
from fm_resources.object_store import ObjectStoreResource


def test_sensor_registers_new_batches_once(fm_env, tmp_path):
    store = ObjectStore(str(fm_env))
    src = tmp_path / "docs.jsonl"
    src.write_text('{"text": "hello world"}\n')
    first = land_batch(store, src, source="s1", license_id="MIT", namespace="cloud")
    # an incomplete batch (no _batch.json yet) must not be picked up
    store.write_bytes("landing/incomplete-batch/files/docs.jsonl", b'{"text": "x"}\n')

    instance = dagster_instance(load_settings())
    resource = ObjectStoreResource(root=str(fm_env))
    result = landing_batch_sensor(build_sensor_context(instance=instance, resources={"store": resource}))
    assert [r.partition_key for r in result.run_requests] == [first.batch]
    assert [r.run_key for r in result.run_requests] == [f"landing-batch:{first.batch}"]
    assert list(result.dynamic_partitions_requests[0].partition_keys) == [first.batch]

    instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, [first.batch])  # what the daemon does with the request
    second = land_batch(store, src, source="s2", license_id="MIT", namespace="cloud")
    result = landing_batch_sensor(build_sensor_context(instance=instance, resources={"store": resource}))
    assert [r.partition_key for r in result.run_requests] == [second.batch]
