"""The landing sensor adds one partition and one run request per new complete batch, idempotently, keeping a
cursor; the release sensor requests one release run after a run that materialized the release's inputs; the
local profile runs a run's steps in its run worker and a failing blocking check still stops what follows."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    DefaultSensorStatus,
    Definitions,
    RunRequest,
    SkipReason,
    asset,
    build_run_status_sensor_context,
    build_sensor_context,
    define_asset_job,
    execute_job,
    in_process_executor,
    reconstructable,
)
from dagster._core.definitions.job_definition import JobDefinition

from fm_assets.cli.runner import dagster_instance
from fm_assets.defs.build import build_definitions
from fm_assets.defs.instance import LOCAL_INSTANCE_TEMPLATE, ensure_instance_config
from fm_assets.defs.jobs import RELEASE_RUN_TAG_KEY, RELEASE_RUN_TAG_VALUE
from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME
from fm_assets.defs.resources.object_store import ObjectStoreResource
from fm_assets.defs.sensors import LandingCursor, landing_batch_sensor, release_after_preprocess
from fm_assets.engine import materialize as engine_materialize
from fm_assets.engine.checks import CheckOutcome
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import load_settings
from fm_assets.stages.names import CHAIN_NAMES


def evaluate(instance: DagsterInstance, root: Path, cursor: str | None):
    resource = ObjectStoreResource(root=str(root))
    return landing_batch_sensor(
        build_sensor_context(instance=instance, resources={"store": resource}, cursor=cursor)
    )


def apply(instance: DagsterInstance, result) -> str:
    """What the daemon does with a sensor result: add the requested partitions, keep the cursor."""
    for request in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, list(request.partition_keys))
    return result.cursor


@pytest.fixture
def landed(fm_env, tmp_path):
    store = ObjectStore(str(fm_env))
    src = tmp_path / "docs.jsonl"
    src.write_text('{"text": "hello world"}\n')

    def land(source: str, batch_id: str | None = None) -> str:
        return land_batch(
            store, src, source=source, license_id="MIT", namespace="cloud", batch_id=batch_id
        ).batch

    return store, land


def test_sensor_registers_new_batches_once(fm_env, landed):
    store, land = landed
    first = land("s1")
    # an incomplete batch (no _batch.json yet) must not be picked up
    store.write_bytes("landing/incomplete-batch/files/docs.jsonl", b'{"text": "x"}\n')

    instance = dagster_instance(load_settings())
    result = evaluate(instance, fm_env, None)
    assert [r.partition_key for r in result.run_requests] == [first]
    assert [r.run_key for r in result.run_requests] == [f"landing-batch:{first}"]
    assert list(result.dynamic_partitions_requests[0].partition_keys) == [first]
    cursor = apply(instance, result)
    assert LandingCursor.parse(cursor).last == first

    second = land("s2")
    result = evaluate(instance, fm_env, cursor)
    assert [r.partition_key for r in result.run_requests] == [second]
    cursor = apply(instance, result)

    # nothing new: no requests, and the same cursor
    result = evaluate(instance, fm_env, cursor)
    assert result.run_requests == [] and result.dynamic_partitions_requests == []
    assert result.cursor == cursor


def test_cursor_skips_batches_already_handled(fm_env, landed, monkeypatch):
    """With a cursor, an idle tick looks up no batch's _batch.json and never queries the partitions."""
    _, land = landed
    batches = [land(f"s{i}") for i in range(3)]
    instance = dagster_instance(load_settings())
    cursor = apply(instance, evaluate(instance, fm_env, None))
    assert sorted(instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME)) == batches

    lookups: list[str] = []
    exists = ObjectStore.exists
    monkeypatch.setattr(ObjectStore, "exists", lambda self, rel: lookups.append(rel) or exists(self, rel))
    monkeypatch.setattr(
        DagsterInstance,
        "get_dynamic_partitions",
        lambda *a, **k: pytest.fail("idle tick queried the partitions"),
    )
    result = evaluate(instance, fm_env, cursor)
    assert result.run_requests == [] and lookups == []


def test_late_batches_below_the_cursor_are_not_lost(fm_env, landed):
    """A batch that completes after a newer one (slow upload) or lands with an id that sorts before the
    cursor is still registered exactly once."""
    store, land = landed
    instance = dagster_instance(load_settings())
    # an upload that started first (older id) but is not complete yet, then a newer complete batch
    slow = "20000101T000000000000Z-slow-00000000"
    store.write_bytes(f"landing/{slow}/files/docs.jsonl", b'{"text": "slow"}\n')
    newer = land("fast")
    result = evaluate(instance, fm_env, None)
    assert [r.partition_key for r in result.run_requests] == [newer]
    cursor = apply(instance, result)
    assert LandingCursor.parse(cursor).pending == [slow]

    store.write_json(f"landing/{slow}/_batch.json", {"batch": slow, "files": []})  # the slow upload completes
    result = evaluate(instance, fm_env, cursor)
    assert [r.partition_key for r in result.run_requests] == [slow]
    cursor = apply(instance, result)
    assert LandingCursor.parse(cursor).pending == []

    early = land("explicit", batch_id="0-explicit-id")  # sorts before every timestamped id
    result = evaluate(instance, fm_env, cursor)
    assert [r.partition_key for r in result.run_requests] == [early]
    cursor = apply(instance, result)
    assert evaluate(instance, fm_env, cursor).run_requests == []


def test_batches_registered_by_fm_run_are_not_requested(fm_env, landed):
    _, land = landed
    batch = land("s1")
    instance = dagster_instance(load_settings())
    instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, [batch])  # what `fm run` does before running it
    result = evaluate(instance, fm_env, None)
    assert result.run_requests == [] and result.dynamic_partitions_requests == []
    assert LandingCursor.parse(result.cursor).last == batch


def test_sensors_are_on_by_default_and_local_runs_in_process(fm_env):
    defs = build_definitions(load_settings())
    sensors = {sensor.name: sensor for sensor in defs.sensors or []}
    assert set(sensors) == {"landing_batch_sensor", "release_after_preprocess"}
    assert all(sensor.default_status == DefaultSensorStatus.RUNNING for sensor in sensors.values())
    assert defs.resolve_job_def("preprocess").executor_def.name == "in_process"
    assert defs.resolve_job_def("release").run_tags[RELEASE_RUN_TAG_KEY] == RELEASE_RUN_TAG_VALUE


@asset(name="shard")
def shard_stub() -> int:
    return 1


@asset(name="land")
def land_stub() -> int:
    return 1


@asset(name="dataset_release")
def release_stub() -> int:
    return 1


STUBS = Definitions(
    assets=[shard_stub, land_stub, release_stub],
    jobs=[
        define_asset_job("preprocess", selection="shard"),
        define_asset_job("land_only", selection="land"),
        define_asset_job("release", selection="dataset_release"),
    ],
    executor=in_process_executor,
)


def release_decision(instance: DagsterInstance, job: str) -> RunRequest | SkipReason:
    result = STUBS.resolve_job_def(job).execute_in_process(instance=instance)
    context = build_run_status_sensor_context(
        sensor_name="release_after_preprocess",
        dagster_event=result.get_run_success_event(),
        dagster_instance=instance,
        dagster_run=result.dagster_run,
    )
    decision = release_after_preprocess(context)
    assert isinstance(decision, (RunRequest, SkipReason))
    return decision


def test_release_follows_runs_that_changed_its_inputs(tmp_path):
    with DagsterInstance.ephemeral() as instance:
        decision = release_decision(instance, "preprocess")
        assert isinstance(decision, RunRequest)
        triggering = instance.get_runs(limit=1)[0].run_id
        assert decision.run_key == f"release-after:{triggering}"

        assert isinstance(release_decision(instance, "land_only"), SkipReason)  # shard untouched
        assert isinstance(release_decision(instance, "release"), SkipReason)  # a release never re-triggers

        # a release created after a preprocess run ended reads its output: no second request for that run
        ended = STUBS.resolve_job_def("preprocess").execute_in_process(instance=instance)
        time.sleep(1.1)  # run creation times are stored to the second
        STUBS.resolve_job_def("release").execute_in_process(instance=instance)
        context = build_run_status_sensor_context(
            sensor_name="release_after_preprocess",
            dagster_event=ended.get_run_success_event(),
            dagster_instance=instance,
            dagster_run=ended.dagster_run,
        )
        decision = release_after_preprocess(context)
        assert isinstance(decision, SkipReason) and "will include it" in (decision.skip_message or "")


def test_instance_template_is_installed_once(tmp_path):
    home = tmp_path / "home"
    config = ensure_instance_config(home)
    assert config.read_text() == LOCAL_INSTANCE_TEMPLATE.read_text().replace("__DAGSTER_HOME__", str(home))
    with DagsterInstance.from_config(str(home)) as instance:  # no DAGSTER_HOME needed (`fm run`)
        runs = instance.get_concurrency_config().run_queue_config
        assert runs is not None and runs.max_concurrent_runs == 2
        assert {
            "key": RELEASE_RUN_TAG_KEY,
            "value": RELEASE_RUN_TAG_VALUE,
            "limit": 1,
        } in runs.tag_concurrency_limits
        assert instance.global_op_concurrency_default_limit == 1
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert not instance.telemetry_enabled
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"
        assert type(instance.event_log_storage).__name__ == "LocalSqliteEventLogStorage"
        assert (home / "history" / "runs.db").exists()
    config.write_text("telemetry:\n  enabled: true\n")  # the user's own config is kept
    ensure_instance_config(home)
    assert config.read_text() == "telemetry:\n  enabled: true\n"


def local_preprocess_job() -> JobDefinition:
    return build_definitions(load_settings()).resolve_job_def("preprocess")


def test_blocking_check_failure_stops_the_run_under_the_local_executor(fm_env, landed, monkeypatch):
    """execute_job runs the job with its own executor (in_process for the local profile), in this process,
    so a check forced to fail here is the check the run sees."""
    _, land = landed
    batch = land("s1")
    instance = dagster_instance(load_settings())
    instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, [batch])
    evaluate = engine_materialize.evaluate_checks

    def failing_land_accounting(stage, store, success):
        outcomes = evaluate(stage, store, success)
        if stage.name == "land":
            outcomes["accounting"] = CheckOutcome(False, {"forced": True}, "forced failure")
        return outcomes

    monkeypatch.setattr(engine_materialize, "evaluate_checks", failing_land_accounting)
    with execute_job(
        reconstructable(local_preprocess_job),
        instance,
        tags={"dagster/partition": batch},
        raise_on_error=False,
    ) as result:
        assert not result.success
        messages = [
            e.message or "" for e in result.all_events if e.event_type == DagsterEventType.ENGINE_EVENT
        ]
        assert any(m.startswith("Executing steps in process") for m in messages), messages
        started = {e.step_key for e in result.all_events if e.event_type == DagsterEventType.STEP_START}
        # nothing downstream of land ran; the media chain does not read land and goes on, and quality_model
        # depends on no stage, so it may run beside land
        assert result.get_failed_step_keys() == {"land"} and started - set(CHAIN_NAMES["media"]) - {
            "quality_model"
        } == {"land"}
        (accounting,) = [
            c
            for c in result.get_asset_check_evaluations()
            if c.check_name == "accounting" and c.asset_key == AssetKey("land")
        ]
        assert accounting.passed is False and accounting.asset_key == AssetKey("land")
    assert instance.get_latest_materialization_event(AssetKey("land")) is not None
    assert instance.get_latest_materialization_event(AssetKey("validate")) is None
