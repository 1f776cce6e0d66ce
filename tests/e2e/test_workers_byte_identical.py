"""Every text stage runs its units on the worker pool, and the whole chain (near_dedup's removals,
decontaminate, tokenize, pack, shard included) writes byte-identical files with 1 and 2 workers, and with
every stage's units as Spark tasks on a standalone master + 2 workers on loopback."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from fm_assets.cli.runner import run_batches
from fm_assets.engine import layout
from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import load_settings
from fm_assets.stages.registry import CHAIN_NAMES

pytestmark = [pytest.mark.slow]

POOLED = ("validate", "filter", "near_dedup", "decontaminate", "tokenize", "pack", "shard")
BATCH = "b-workers"  # the batch id is in the rows: the same in every root


def output_digests(store: ObjectStore, batch: str) -> dict[str, dict[str, str]]:
    """sha256 of every file each stage wrote, but the unit markers, _SUCCESS.json and _checks_cost.json (they
    hold timings)."""
    digests = {}
    for stage in CHAIN_NAMES["text"]:
        success = read_success(store, stage, batch)
        folder = Path(store.root) / success.prefix
        digests[stage] = {
            str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*"))
            if path.is_file()
            and "_units" not in path.parts
            and path.name not in ("_SUCCESS.json", "_checks_cost.json")
        }
    return digests


def data_versions(store: ObjectStore, batch: str) -> dict[str, str]:
    return {stage: read_success(store, stage, batch).data_version for stage in CHAIN_NAMES["text"]}


def land_and_run(root: Path, sample: dict, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
    """Land the sample's first package as ``BATCH`` into ``root`` and `fm run` it with the environment's
    settings (one Dagster run in this process, as the CLI runs it)."""
    package = sorted(sample["packages"])[0]
    monkeypatch.setenv("FM_ROOT", str(root))
    store = ObjectStore(str(root))
    land_batch(
        store,
        Path(sample["dest"]) / package,
        source=package,
        license_id=sample["packages"][package]["license"],
        namespace="cloud",
        batch_id=BATCH,
    )
    assert run_batches(load_settings()) == {}
    return store


@pytest.fixture
def chain_env(fm_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """fm_env with several units in every stage, pack's included."""
    monkeypatch.setenv("FM_PACK_TOKENS_PER_UNIT", "100000")  # several pack units from a small batch
    monkeypatch.setenv("FM_MIN_PACKING_EFFICIENCY", "0.5")  # ... each with its own partial last row
    return fm_env


def test_one_and_two_workers_write_the_same_bytes_in_every_stage(
    chain_env: Path, real_sample: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FM_SPARK_MASTER", "local[1]")  # near_dedup stays below the in-process threshold
    results = {}
    for workers in (1, 2):
        monkeypatch.setenv("FM_WORKERS", str(workers))
        store = land_and_run(chain_env.parent / f"root-w{workers}", real_sample, monkeypatch)
        results[workers] = (store, output_digests(store, BATCH))
    (store1, one), (store2, two) = results[1], results[2]
    assert one.keys() == two.keys()
    for stage in CHAIN_NAMES["text"]:
        assert one[stage], stage  # the stage wrote files
        assert one[stage] == two[stage], stage
    for stage in POOLED:  # with 2 workers these stages' units really ran on the pool
        success = read_success(store2, stage, BATCH)
        assert len(success.units) >= 2, stage
        assert success.cost["units_where"] == "2 worker processes", (stage, success.cost)
        assert 0 < success.cost["units_wall_seconds"] <= success.seconds + 1e-3, stage
    # the checks that re-read the output ran inside every unit, on the workers, and found the same either way
    for stage, check in (("decontaminate", "no_eval_contamination"), ("tokenize", "hf_reencode_sample")):
        success = read_success(store2, stage, BATCH)
        findings = success.unit_checks[check]
        assert len(findings) == len(success.units) >= 2 and None not in findings, (stage, findings)
        assert success.cost["unit_check_seconds"] > 0, (stage, success.cost)
        assert findings == read_success(store1, stage, BATCH).unit_checks[check], stage
        # and nothing of them is left for the driver to spread after the stage
        assert store2.read_json(layout.check_costs(success.prefix))[check]["tasks"] == 0, stage


@pytest.mark.spark
@pytest.mark.cluster
def test_every_stage_as_spark_tasks_on_a_two_worker_cluster_writes_the_local_bytes(
    chain_env: Path, real_sample: dict, monkeypatch: pytest.MonkeyPatch, spark_cluster_master: str
) -> None:
    from loopback_spark import EXECUTOR_CONF
    from pyspark.sql import SparkSession

    monkeypatch.setenv("FM_WORKERS", "1")
    monkeypatch.setenv("FM_SPARK_MASTER", "local[1]")
    local = land_and_run(chain_env.parent / "root-local", real_sample, monkeypatch)

    monkeypatch.setenv("FM_UNIT_EXECUTOR", "spark")
    monkeypatch.setenv("FM_SPARK_MASTER", spark_cluster_master)
    monkeypatch.setenv("FM_SPARK_CONF", json.dumps(EXECUTOR_CONF))
    cluster = land_and_run(chain_env.parent / "root-cluster", real_sample, monkeypatch)

    # the run's session (still live in this process) is the cluster's, with one executor per worker
    session = SparkSession.builder.getOrCreate()
    assert session.sparkContext.master == spark_cluster_master
    conf = session.sparkContext.getConf()
    assert {key: conf.get(key) for key in EXECUTOR_CONF} == EXECUTOR_CONF  # FM_SPARK_CONF reached the session
    jvm_context: Any = session.sparkContext._jsc
    assert jvm_context.sc().getExecutorMemoryStatus().size() - 1 == 2  # block managers less the driver's

    assert output_digests(cluster, BATCH) == output_digests(local, BATCH)  # shards and every other file
    assert data_versions(cluster, BATCH) == data_versions(local, BATCH)
    ran_on_spark = []
    for stage in CHAIN_NAMES["text"]:
        success = read_success(cluster, stage, BATCH)
        if success.units:
            assert success.cost["units_where"] == "spark", (stage, success.cost)
            ran_on_spark.append(stage)
        assert read_success(local, stage, BATCH).cost["units_where"] != "spark", stage
    assert set(POOLED) <= set(ran_on_spark), ran_on_spark
    shard = read_success(cluster, "shard", BATCH)
    assert any(name.endswith(".tar") for name in output_digests(cluster, BATCH)["shard"]), shard.prefix
