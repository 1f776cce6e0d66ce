"""Units as Spark tasks (``unit_executor="spark"``): local mode and a standalone master + worker on loopback
write exactly what the in-process run writes, and a unit's failure in an executor names the unit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pool_helpers import FlakyFilter, committed_units, fingerprint, run_one, settings

from fm_assets.defs.resources.spark import SparkResource
from fm_assets.engine.pool import UnitFailedError
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.filter import STAGE as FILTER

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
