"""The path users take without the CLI: a real ``dagster-daemon`` and ``dagster-webserver`` on workspace.yaml
with the local instance config. A batch that lands is registered by the (default-on) landing sensor, its
preprocess run is queued, launched in a run worker and succeeds, and the release run follows on its own.

A run worker that dies before its first step (the pyspark ``sys.exit`` on import this guards against) fails
this test with the run's failure events, not a timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, DagsterRunStatus
from dagster_stack import DagsterStack

from fm_assets.defs.jobs import RELEASE_RUN_TAG_KEY, RELEASE_RUN_TAG_VALUE
from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import CHAIN_NAMES
from fm_loader.manifest import DatasetManifest

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(2400)]

DATASET = "fm-demo"
SENSORS_QUERY = "{ repositoriesOrError { ... on RepositoryConnection { nodes { sensors { name sensorState { status } } } } } }"
RUN_QUERY = "query($id: ID!) { runOrError(runId: $id) { ... on Run { status jobName } } }"


def test_landed_batch_runs_through_sensor_daemon_and_release(
    dagster_stack: DagsterStack, sample_files: list[tuple[Path, str, str]]
) -> None:
    stack = dagster_stack
    stack.start_daemon()
    stack.start_webserver()
    stack.wait_for_webserver()
    stack.wait_for_daemons()

    # both sensors are on without anyone touching the UI
    (repository,) = stack.graphql(SENSORS_QUERY)["repositoriesOrError"]["nodes"]
    sensors = repository["sensors"]
    assert {s["name"]: s["sensorState"]["status"] for s in sensors} == {
        "landing_batch_sensor": "RUNNING",
        "release_after_preprocess": "RUNNING",
    }

    # a small batch of real documents lands while everything runs
    path, source, licence = sample_files[0]
    store = ObjectStore(str(stack.root))
    batch = land_batch(store, path, source=source, license_id=licence, namespace="cloud").batch

    stack.wait_for(
        f"the sensor to register partition {batch}",
        lambda: batch in stack.instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME),
        timeout=300,
    )
    preprocess = stack.wait_for(
        "the sensor's preprocess run",
        lambda: stack.runs(job_name="preprocess", tags={"dagster/partition": batch}),
        timeout=300,
    )
    assert len(preprocess) == 1
    run = preprocess[0]
    assert run.tags["dagster/run_key"] == f"landing-batch:{batch}"
    assert run.tags["dagster/sensor_name"] == "landing_batch_sensor"

    stack.wait_for_run(run.run_id, timeout=1500)
    # every stage materialized this partition, in one run worker (the in-process executor)
    for stage in CHAIN_NAMES["text"]:
        event = stack.instance.get_latest_materialization_event(AssetKey(stage))
        assert event is not None and event.run_id == run.run_id, stage
        assert event.dagster_event is not None and event.dagster_event.partition == batch, stage
    messages = stack.engine_messages(run.run_id)
    assert any(m.startswith("Executing steps in process") for m in messages), messages
    assert not any("multiprocess executor" in m for m in messages), messages
    # the Spark stages and the tokenizer ran under their pools, limited by the instance config
    pools = stack.instance.event_log_storage.get_concurrency_keys()
    assert {"spark", "tokenizer"} <= pools, pools
    assert stack.instance.event_log_storage.get_concurrency_info("spark").slot_count == 1

    # the release follows by itself
    releases = stack.wait_for(
        "the release run requested after the preprocess run",
        lambda: stack.runs(job_name="release", tags={"dagster/run_key": f"release-after:{run.run_id}"}),
        timeout=300,
    )
    assert len(releases) == 1
    release = releases[0]
    assert release.tags["dagster/sensor_name"] == "release_after_preprocess"
    assert release.tags[RELEASE_RUN_TAG_KEY] == RELEASE_RUN_TAG_VALUE
    stack.wait_for_run(release.run_id, timeout=900)
    for asset in ("dataset_release", "curated_documents", "documents_lance"):
        event = stack.instance.get_latest_materialization_event(AssetKey(asset))
        assert event is not None and event.run_id == release.run_id, asset

    # the webserver reports what the instance holds
    for run_id in (run.run_id, release.run_id):
        assert (
            stack.graphql(RUN_QUERY, {"id": run_id})["runOrError"]["status"] == DagsterRunStatus.SUCCESS.value
        )

    # and the dataset version is there, over exactly this batch
    latest = store.read_json(f"datasets/{DATASET}/LATEST.json")["version"]
    manifest = DatasetManifest.load(store.uri(f"datasets/{DATASET}/{latest}/manifest.json"))
    assert manifest.rows > 0 and manifest.tokens > 0
    card = store.read_json(f"datasets/{DATASET}/{latest}/card.json")
    assert [b["batch"] for b in card["batches"]] == [batch]
    assert len(stack.runs(job_name="release")) == 1  # one release for one batch
