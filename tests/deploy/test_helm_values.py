"""deploy/helm/values.yaml: every key exists in Dagster's chart (tests/deploy/chart_layout.py), the code
location runs the image's command with a usable prod profile, nothing secret is inline, and the run pods
the K8sRunLauncher builds from the chart's container context get the code location's environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import DagsterK8sJobConfig, construct_dagster_k8s_job

from fm_assets.settings import Settings, load_settings

from .chart_layout import CHART_CHOICES, CHART_CONFIG_BRANCH, CHART_LAYOUT
from .files import DEPLOY, dockerfile_cmd, dockerfile_env, literal_env, load_yaml, looks_secret, option


def unknown_keys(values: Any, layout: Any, path: str = "") -> Iterator[str]:
    """Dotted paths of keys in ``values`` that the chart layout does not have."""
    if layout is None:  # OPEN: passed through by the chart
        return
    if isinstance(layout, list):
        assert isinstance(values, list), f"{path}: the chart expects a list"
        for index, item in enumerate(values):
            yield from unknown_keys(item, layout[0], f"{path}[{index}]")
        return
    assert isinstance(values, dict), f"{path}: the chart expects a mapping"
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in layout:
            yield where
        else:
            yield from unknown_keys(value, layout[key], where)


def at(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        values = values[key]
    return values


def prod_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings as the code location reads them from exactly ``env`` (and FM_PROFILE=prod from the image)."""
    for name in list(os.environ):
        if name.startswith("FM_") or name in ("DAGSTER_HOME", "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(name)
    for name, value in {**dockerfile_env(), **env}.items():
        if name.startswith("FM_") or name == "AWS_DEFAULT_REGION":
            monkeypatch.setenv(name, value)
    settings = load_settings()
    settings.validate_for_profile()
    return settings


def test_every_key_is_one_of_the_charts(helm_values: dict[str, Any]) -> None:
    assert list(unknown_keys(helm_values, CHART_LAYOUT)) == []


def test_the_key_check_catches_a_misspelt_key(helm_values: dict[str, Any]) -> None:
    bad = {
        **helm_values,
        "computeLogManager": {"type": "S3ComputeLogManager", "config": {"s3ComputeLogManger": {}}},
    }
    bad["dagsterDaemon"] = {**helm_values["dagsterDaemon"], "runMonitor": {"enabled": True}}
    assert sorted(unknown_keys(bad, CHART_LAYOUT)) == [
        "computeLogManager.config.s3ComputeLogManger",
        "dagsterDaemon.runMonitor",
    ]


def test_types_are_chart_choices_and_their_config_branch_is_the_one_set(helm_values: dict[str, Any]) -> None:
    for path, choices in CHART_CHOICES.items():
        assert at(helm_values, path) in choices, path
    for path, branches in CHART_CONFIG_BRANCH.items():
        block = at(helm_values, path)
        assert block["type"] in branches, f"{path}: type {block['type']} is not the one this deployment needs"
        assert set(block["config"]) == {branches[block["type"]]}, path


def test_runs_go_through_the_queue_to_kubernetes_jobs_with_the_daemon(helm_values: dict[str, Any]) -> None:
    assert helm_values["runLauncher"]["type"] == "K8sRunLauncher"
    daemon = helm_values["dagsterDaemon"]
    assert daemon["enabled"] is True
    assert daemon["runCoordinator"]["enabled"] is True
    assert daemon["runCoordinator"]["type"] == "QueuedRunCoordinator"
    # the chart refuses limits in both places; ours are under `concurrency`
    queued = daemon["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert "maxConcurrentRuns" not in queued and "tagConcurrencyLimits" not in queued
    concurrency = helm_values["concurrency"]
    assert concurrency["enabled"] is True
    assert concurrency["pools"]["granularity"] == "op"
    assert concurrency["pools"]["defaultLimit"] >= 1


def test_release_runs_are_limited_to_one_at_a_time(helm_values: dict[str, Any]) -> None:
    from fm_assets.defs.jobs import release_job

    limits = helm_values["concurrency"]["runs"]["tagConcurrencyLimits"]
    release = [lim for lim in limits if release_job.run_tags.get(lim["key"]) == lim.get("value")]
    assert [lim["limit"] for lim in release] == [1], (limits, release_job.run_tags)


def test_storage_is_an_external_postgres_whose_password_is_a_secret(helm_values: dict[str, Any]) -> None:
    postgres = helm_values["postgresql"]
    assert postgres["enabled"] is False and postgres["postgresqlHost"]
    assert postgres["postgresqlPassword"] == ""
    assert helm_values["generatePostgresqlPasswordSecret"] is False
    assert helm_values["global"]["postgresqlSecretName"]


def test_compute_logs_go_to_s3_through_dagster_aws(helm_values: dict[str, Any]) -> None:
    from dagster_aws.s3.compute_log_manager import S3ComputeLogManager

    manager = helm_values["computeLogManager"]
    assert manager["type"] == S3ComputeLogManager.__name__
    assert manager["config"]["s3ComputeLogManager"]["bucket"]


def test_code_server_runs_the_images_command(code_deployment: dict[str, Any]) -> None:
    cmd = dockerfile_cmd()
    args = code_deployment["dagsterApiGrpcArgs"]
    assert option(args, "-m", "--module-name") == option(cmd, "-m", "--module-name")
    assert option(args, "-a", "--attribute") == option(cmd, "-a", "--attribute")
    assert str(code_deployment["port"]) == option(cmd, "-p", "--port")
    assert code_deployment["includeConfigInLaunchedRuns"]["enabled"] is True
    assert code_deployment["image"]["repository"]


def test_code_location_env_is_a_usable_prod_profile(
    code_deployment: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = literal_env(code_deployment["env"])
    settings = prod_settings(env, monkeypatch)
    assert settings.profile == "prod"
    assert settings.is_remote and settings.root.startswith("s3://")
    assert settings.resolved_spark_master.startswith("spark://")
    # validate_for_profile asks for a URI only with the sql catalog; a REST catalog needs one too
    assert settings.iceberg_catalog_type in ("rest", "glue")
    assert settings.iceberg_catalog_type != "rest" or settings.iceberg_uri
    assert settings.s3_region


def test_no_secret_is_written_inline(helm_values: dict[str, Any]) -> None:
    def env_entries(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "env" and isinstance(value, list):
                    yield from value
                else:
                    yield from env_entries(value)
        elif isinstance(node, list):
            for item in node:
                yield from env_entries(item)

    entries = list(env_entries(helm_values))
    assert entries, "found no env to check"
    inline = [entry["name"] for entry in entries if looks_secret(entry["name"]) and "value" in entry]
    assert inline == []
    deployment = helm_values["dagster-user-deployments"]["deployments"][0]
    assert [secret["name"] for secret in deployment["envSecrets"]] == ["fm-data-platform-secrets"]


def test_spark_scratch_is_the_shared_claim_mounted_at_tmpdir(code_deployment: dict[str, Any]) -> None:
    pvc = load_yaml(DEPLOY / "k8s" / "scratch-pvc.yaml")
    assert pvc["kind"] == "PersistentVolumeClaim"
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    (volume,) = [v for v in code_deployment["volumes"] if "persistentVolumeClaim" in v]
    assert volume["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    (mount,) = [m for m in code_deployment["volumeMounts"] if m["name"] == volume["name"]]
    assert literal_env(code_deployment["env"])["TMPDIR"] == mount["mountPath"]
    (spark_ip,) = [e for e in code_deployment["env"] if e["name"] == "SPARK_LOCAL_IP"]
    assert spark_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def chart_container_context(values: dict[str, Any], deployment: dict[str, Any]) -> dict[str, Any]:
    """The container context the chart gives a user deployment with includeConfigInLaunchedRuns (its
    ``dagsterUserDeployments.k8sContainerContext`` helper, for the fields this deployment sets)."""
    return {
        "k8s": {
            "image_pull_policy": deployment["image"]["pullPolicy"],
            "env_config_maps": [f"fm-dagster-{deployment['name']}-user-env"],
            "env_secrets": [secret["name"] for secret in deployment.get("envSecrets", [])],
            "volume_mounts": deployment.get("volumeMounts", []),
            "volumes": deployment.get("volumes", []),
            "resources": deployment.get("resources", {}),
            "namespace": "dagster",
            "service_account_name": values["global"]["serviceAccountName"],
            "env": deployment["env"],
            "run_k8s_config": {"pod_spec_config": {"automount_service_account_token": True}},
        }
    }


def test_run_pods_get_the_code_locations_env_secrets_and_scratch(
    helm_values: dict[str, Any], code_deployment: dict[str, Any]
) -> None:
    context = K8sContainerContext.create_from_config(chart_container_context(helm_values, code_deployment))
    job = construct_dagster_k8s_job(
        DagsterK8sJobConfig(
            job_image=f"{code_deployment['image']['repository']}:sha",
            dagster_home=helm_values["global"]["dagsterHome"],
            instance_config_map="fm-dagster-instance",
            postgres_password_secret=helm_values["global"]["postgresqlSecretName"],
        ),
        args=["dagster", "api", "execute_run", "{}"],
        job_name="dagster-run-0123",
        user_defined_k8s_config=context.run_k8s_config,
        component="run_worker",
    )
    pod = job.spec.template.spec
    (container,) = pod.containers
    env = {e.name: e for e in container.env}
    assert env["FM_PROFILE"].value == "prod"
    assert env["FM_ROOT"].value == literal_env(code_deployment["env"])["FM_ROOT"]
    assert env["SPARK_LOCAL_IP"].value_from.field_ref.field_path == "status.podIP"
    assert env["DAGSTER_PG_PASSWORD"].value_from.secret_key_ref.name == "fm-dagster-postgresql"
    assert "fm-data-platform-secrets" in {e.secret_ref.name for e in container.env_from if e.secret_ref}
    assert [v.persistent_volume_claim.claim_name for v in pod.volumes] == ["fm-spark-scratch"]
    assert [m.mount_path for m in container.volume_mounts] == ["/mnt/fm-scratch"]
    assert pod.service_account_name == "fm-dagster"
    assert container.resources.requests == code_deployment["resources"]["requests"]
    # the launcher sets args only: the image's CMD is replaced, and it has no ENTRYPOINT to prefix them
    assert container.command is None and container.args[:3] == ["dagster", "api", "execute_run"]
