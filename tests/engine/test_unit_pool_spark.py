"""Units as Spark tasks (``unit_executor="spark"``): local mode and a standalone master + 2 workers on
loopback write exactly what the in-process run writes, a unit's failure in an executor names the unit, and
near_dedup above its in-process threshold runs its Spark path on the cluster with the in-process result."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pool_helpers import (
    FlakyFilter,
    ThresholdNearDedup,
    committed_units,
    fingerprint,
    land_planted,
    run_chain,
    run_one,
    settings,
)

from fm_assets.defs.resources.spark import SparkResource
from fm_assets.engine.pool import UnitFailedError
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.filter import STAGE as FILTER
from fm_assets.stages.near_dedup import STAGE as NEAR_DEDUP

pytestmark = [pytest.mark.slow, pytest.mark.spark]

UpstreamCopy = Callable[[str], ObjectStore]
HERE = Path(__file__).resolve().parent


def test_filter_as_spark_tasks_in_local_mode_equals_in_process(
    upstream_copy: UpstreamCopy, clean_filter: dict, caplog: pytest.LogCaptureFixture
) -> None:
    spark = SparkResource(master="local[2]", shuffle_partitions=2)
    spark.session().sparkContext.addPyFile(str(HERE / "pool_helpers.py"))  # FlakyFilter, for the executors
    store = upstream_copy("spark-local")
    flaky = FlakyFilter()
    flaky.fail_unit = sorted(clean_filter["markers"])[-1]
    with pytest.raises(UnitFailedError) as raised:
        run_one(store, flaky, settings(unit_executor="spark"), spark=spark)
    assert raised.value.unit_id == flaky.fail_unit and f"unit {flaky.fail_unit} failed in pid" in str(
        raised.value
    )
    assert "explode_in_unit" in raised.value.remote_traceback
    committed = committed_units(store, clean_filter["success"]["prefix"])
    assert flaky.fail_unit not in committed and committed  # the other tasks committed their units

    with caplog.at_level("INFO", logger="fm_assets.engine.run"):
        outcome = run_one(store, FILTER, settings(unit_executor="spark"), spark=spark)
    assert "units as Spark tasks" in caplog.text
    assert outcome.units_skipped == len(committed)
    after = fingerprint(store, "filter")
    assert after["data_version"] == clean_filter["data_version"]
    assert after["markers"] == clean_filter["markers"] and after["files"] == clean_filter["files"]


def test_spark_units_without_a_spark_resource_fail_loudly(upstream_copy: UpstreamCopy) -> None:
    from fm_assets.engine.run import StageContractError

    with pytest.raises(StageContractError, match="no 'spark' resource"):
        run_one(upstream_copy("no-spark"), FILTER, settings(unit_executor="spark"))


@pytest.mark.cluster
def test_filter_on_a_loopback_standalone_cluster_equals_in_process(
    spark_cluster_master: str, upstream_copy: UpstreamCopy, clean_filter: dict
) -> None:
    spark = SparkResource(
        master=spark_cluster_master,
        shuffle_partitions=2,
        extra_conf={"spark.executor.memory": "768m", "spark.cores.max": "1"},
    )
    store = upstream_copy("spark-cluster")
    outcome = run_one(store, FILTER, settings(unit_executor="spark"), spark=spark)
    assert spark.session().sparkContext.master == spark_cluster_master
    assert outcome.units_computed == len(clean_filter["markers"])
    assert fingerprint(store, "filter") == clean_filter  # _SUCCESS.json, markers, file hashes, data version


def removed_ids(store: ObjectStore) -> dict[str, str]:
    """doc_id -> survivor_id of every document near_dedup removed, read from its rejects files."""
    success = read_success(store, "near_dedup", "b-pool")
    removed = {}
    for rel in success.rejects:
        for row in pq.read_table(store.local_path(rel)).to_pylist():
            assert row["reason"] == "near_duplicate"
            removed[row["doc_id"]] = json.loads(row["details"])["survivor_id"]
    return removed


@pytest.mark.cluster
def test_near_dedup_above_the_in_process_threshold_runs_on_the_cluster_with_the_same_result(
    spark_cluster_master: str, tmp_path: Path
) -> None:
    from loopback_spark import EXECUTOR_CONF

    upstream = land_planted(tmp_path / "upstream", bases=12)
    run_chain(upstream, settings(workers=1, near_dedup=True), until="blocklist")
    stores = {}
    for name in ("in-process", "cluster"):
        shutil.copytree(tmp_path / "upstream", tmp_path / name)
        stores[name] = ObjectStore(str(tmp_path / name))

    never_started = SparkResource(master="local[1]")  # the in-process path never asks for a session
    run_one(stores["in-process"], NEAR_DEDUP, settings(workers=1, near_dedup=True), spark=never_started)
    cluster = SparkResource(master=spark_cluster_master, shuffle_partitions=2, extra_conf=EXECUTOR_CONF)
    cluster.session().sparkContext.addPyFile(str(HERE / "pool_helpers.py"))  # ThresholdNearDedup
    eager = ThresholdNearDedup()
    eager.local_max_docs = 20
    run_one(stores["cluster"], eager, settings(near_dedup=True, unit_executor="spark"), spark=cluster)

    local, remote = (read_success(stores[n], "near_dedup", "b-pool") for n in ("in-process", "cluster"))
    assert local.artifacts["stats"]["engine"] == "local" and remote.artifacts["stats"]["engine"] == "spark"
    assert remote.artifacts["stats"]["docs"] > eager.local_max_docs  # above the threshold it was given
    assert remote.cost["units_where"] == "spark" and local.cost["units_where"] == "in-process"
    assert cluster.session().sparkContext.master == spark_cluster_master
    assert local.key == remote.key and local.data_version == remote.data_version
    removed = removed_ids(stores["in-process"])
    assert len(removed) >= 20  # the planted near-duplicates
    assert removed_ids(stores["cluster"]) == removed
    band_index = {name: entry for name, entry in local.files.items() if name.startswith("band_index/")}
    assert any(name.startswith("band_index/bands/") for name in band_index)
    assert {n: e for n, e in remote.files.items() if n.startswith("band_index/")} == band_index
    assert remote.files == local.files  # every kept part, rejects file and band index file, byte for byte
