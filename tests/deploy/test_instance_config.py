"""deploy/dagster.yaml, the prod Dagster instance: Dagster's own schemas accept it (the instance schema and
each configured class's config type), Dagster reads the run queue and pools we mean from it, compute logs
really land in S3 through dagster-aws (moto), and it agrees with the Helm values and the image."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from dagster import DagsterInstance
from dagster._config import process_config
from dagster._core.instance.config import PoolGranularity, dagster_instance_config
from dagster._core.storage.compute_log_manager import ComputeIOType
from dagster._core.storage.config import pg_config
from dagster._serdes.config_class import ConfigurableClassData
from moto import mock_aws

from .files import DEPLOY, REPO, dockerfile_env

CLASS_SECTIONS = ("run_coordinator", "run_launcher", "compute_logs")


def configured_class(section: dict[str, Any]) -> type:
    """The class a `module`/`class` block names, resolved the way the instance resolves it (Dagster maps
    the public `dagster.core...` module names to their `dagster._core...` homes)."""
    data = ConfigurableClassData(
        section["module"], section["class"], yaml.safe_dump(section.get("config", {}))
    )
    return getattr(importlib.import_module(data.module_name), data.class_name)


def test_dagster_accepts_the_instance_file(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text((DEPLOY / "dagster.yaml").read_text())
    config, custom_class = dagster_instance_config(str(tmp_path))
    assert custom_class is None
    assert set(config["storage"]) == {"postgres"}
    assert config["telemetry"] == {"enabled": False}


@pytest.mark.parametrize("section", CLASS_SECTIONS)
def test_each_configured_class_accepts_its_config(instance_yaml: dict[str, Any], section: str) -> None:
    block = instance_yaml[section]
    result = process_config(configured_class(block).config_type(), block.get("config", {}))
    assert result.success, [error.message for error in result.errors or []]


def test_the_classes_are_the_production_ones(instance_yaml: dict[str, Any]) -> None:
    assert configured_class(instance_yaml["run_launcher"]).__name__ == "K8sRunLauncher"
    assert configured_class(instance_yaml["run_coordinator"]).__name__ == "QueuedRunCoordinator"
    assert configured_class(instance_yaml["compute_logs"]).__module__ == "dagster_aws.s3.compute_log_manager"


def test_postgres_storage_takes_its_password_from_the_environment(
    instance_yaml: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster_postgres.utils import pg_url_from_config

    postgres = instance_yaml["storage"]["postgres"]
    monkeypatch.delenv("DAGSTER_PG_PASSWORD", raising=False)
    assert not process_config(pg_config(), postgres).success  # no password in the file itself
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", "s3cr3t")
    processed = process_config(pg_config(), postgres)
    assert processed.success
    url = pg_url_from_config(processed.value)  # type: ignore[arg-type]
    assert re.match(r"postgresql://dagster:s3cr3t@[^/]+:5432/dagster\?", url), url
    assert "sslmode=require" in url


def test_dagster_reads_the_queue_and_pool_limits_we_mean(
    instance_yaml: dict[str, Any], tmp_path: Path
) -> None:
    """The file's run_coordinator + concurrency + run_monitoring, loaded by a real DagsterInstance (storage
    swapped for SQLite and the Kubernetes/S3 classes left out, since they need a cluster and a bucket)."""
    from fm_assets.defs.jobs import release_job

    config = {k: v for k, v in instance_yaml.items() if k not in ("storage", "run_launcher", "compute_logs")}
    config["storage"] = {"sqlite": {"base_dir": str(tmp_path / "storage")}}
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(config))
    instance = DagsterInstance.from_config(str(tmp_path))
    try:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        concurrency = instance.get_concurrency_config()
        assert concurrency.pool_config.pool_granularity == PoolGranularity.OP
        assert concurrency.pool_config.default_pool_limit == 1
        queue = concurrency.run_queue_config
        assert queue is not None and queue.max_concurrent_runs == 10
        (key, value), *_ = release_job.run_tags.items()
        assert {"key": key, "value": value, "limit": 1} in queue.tag_concurrency_limits
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 600
    finally:
        instance.dispose()


def test_compute_logs_are_uploaded_to_the_configured_bucket_and_prefix(
    instance_yaml: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    section = instance_yaml["compute_logs"]
    config = {**section["config"], "local_dir": str(tmp_path / "logs")}
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": config["region"],
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name=config["region"])
        s3.create_bucket(Bucket=config["bucket"])
        cls = configured_class(section)
        manager = cls.from_config_value(
            ConfigurableClassData(section["module"], section["class"], yaml.safe_dump(config)), config
        )
        log_key = ["0123-run", "compute_logs", "near_dedup"]
        with manager.open_log_stream(log_key, ComputeIOType.STDOUT) as stream:
            stream.write("near_dedup: 12 duplicates removed\n")
        with manager.open_log_stream(log_key, ComputeIOType.STDERR) as stream:
            stream.write("")
        keys = {obj["Key"] for obj in s3.list_objects_v2(Bucket=config["bucket"])["Contents"]}
        stdout_key = f"{config['prefix']}/storage/0123-run/compute_logs/near_dedup.out"
        assert stdout_key in keys, keys
        # skip_empty_files: the empty stderr is not uploaded
        assert not any(key.endswith("near_dedup.err") for key in keys)
        body = s3.get_object(Bucket=config["bucket"], Key=stdout_key)["Body"].read()
        assert body == b"near_dedup: 12 duplicates removed\n"
        manager.dispose()


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def snake_keys(node: Any) -> Any:
    if isinstance(node, dict):
        return {snake(k): snake_keys(v) for k, v in node.items()}
    if isinstance(node, list):
        return [snake_keys(v) for v in node]
    return node


def test_the_helm_values_configure_the_same_instance(
    instance_yaml: dict[str, Any], helm_values: dict[str, Any]
) -> None:
    assert (
        snake_keys(helm_values["computeLogManager"]["config"]["s3ComputeLogManager"])
        == (instance_yaml["compute_logs"]["config"])
    )
    concurrency = {k: v for k, v in helm_values["concurrency"].items() if k != "enabled"}
    assert snake_keys(concurrency) == instance_yaml["concurrency"]
    monitoring = snake_keys(helm_values["dagsterDaemon"]["runMonitoring"])
    assert monitoring == instance_yaml["run_monitoring"]
    assert snake_keys(helm_values["dagsterDaemon"]["runRetries"]) == instance_yaml["run_retries"]
    queued = helm_values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert snake_keys(queued) == instance_yaml["run_coordinator"]["config"]
    assert helm_values["telemetry"] == instance_yaml["telemetry"]
    postgres = instance_yaml["storage"]["postgres"]["postgres_db"]
    assert postgres["hostname"] == helm_values["postgresql"]["postgresqlHost"]
    assert postgres["db_name"] == helm_values["postgresql"]["postgresqlDatabase"]
    assert postgres["params"] == helm_values["postgresql"]["postgresqlParams"]


def test_run_launcher_names_match_the_chart_and_the_image(
    instance_yaml: dict[str, Any], helm_values: dict[str, Any]
) -> None:
    launcher = instance_yaml["run_launcher"]["config"]
    assert launcher["postgres_password_secret"] == helm_values["global"]["postgresqlSecretName"]
    assert launcher["service_account_name"] == helm_values["global"]["serviceAccountName"]
    assert (
        launcher["dagster_home"] == helm_values["global"]["dagsterHome"] == dockerfile_env()["DAGSTER_HOME"]
    )


def test_the_pipeline_extra_installs_every_instance_module(instance_yaml: dict[str, Any]) -> None:
    """The image installs `.[pipeline]` only: each module the instance imports must come with it."""
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "pipeline"
    ]
    installed = {Requirement(line).name.lower() for line in extra}
    modules = {
        configured_class(instance_yaml[section]).__module__.split(".")[0] for section in CLASS_SECTIONS
    }
    modules |= {"dagster_postgres"} if "postgres" in instance_yaml["storage"] else set()
    needed = {module.replace("_", "-") for module in modules}
    assert needed - installed == set(), f"add to the pipeline extra in pyproject.toml: {needed - installed}"
