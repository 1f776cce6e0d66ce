"""dagster_cloud.yaml (Dagster+ Hybrid, Kubernetes agent): the dagster-cloud CLI's offline check passes (and
rejects the file this replaced), the code source is the image's, the env is a usable prod profile, and
dagster-k8s turns the container context into the run pod we mean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import DagsterK8sJobConfig, construct_dagster_k8s_job

from fm_assets.settings import load_settings

from .files import REPO, dockerfile_cmd, dockerfile_env, dockerfile_user, load_yaml, looks_secret, option

# what dagster_cloud.yaml held before: `attribute` inside code_source, which the CLI rejects
OLD_LOCATION = """\
locations:
  - location_name: fm-data-platform
    code_source:
      module_name: fm_assets.definitions
      attribute: defs
    build:
      directory: .
"""


def ci_check(project_dir: Path) -> subprocess.CompletedProcess[str]:
    cli = Path(sys.executable).parent / "dagster-cloud"
    assert cli.exists(), "dagster-cloud CLI not installed (PyPI package dagster-cloud-cli, in the test extra)"
    return subprocess.run(
        [str(cli), "ci", "check", "--project-dir", str(project_dir), "--dagster-cloud-connect-check", "skip"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def env_vars(location: dict[str, Any]) -> dict[str, str]:
    """The container context's env_vars entries given as NAME=value."""
    pairs = [entry.split("=", 1) for entry in location["container_context"]["k8s"]["env_vars"]]
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def test_dagster_cloud_ci_check_passes() -> None:
    result = ci_check(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Checked OK" in result.stdout


def test_dagster_cloud_ci_check_rejects_the_old_file(tmp_path: Path) -> None:
    (tmp_path / "dagster_cloud.yaml").write_text(OLD_LOCATION)
    result = ci_check(tmp_path)
    assert result.returncode != 0
    assert "only one of the following fields should be defined: module_name, attribute" in result.stdout


def test_code_source_is_the_images_and_the_workspaces(cloud_location: dict[str, Any]) -> None:
    cmd = dockerfile_cmd()
    assert cloud_location["code_source"] == {"module_name": option(cmd, "-m", "--module-name")}
    assert cloud_location["attribute"] == option(cmd, "-a", "--attribute")
    (workspace_entry,) = load_yaml(REPO / "workspace.yaml")["load_from"]
    # the local code location carries the same name as the deployed one (the UI shows it, not a module path)
    assert workspace_entry["python_module"] == {
        "module_name": cloud_location["code_source"]["module_name"],
        "attribute": cloud_location["attribute"],
        "location_name": cloud_location["location_name"],
    }
    assert cloud_location["build"]["directory"] == "."  # deploy/Dockerfile's context is the repository root


def test_env_is_a_usable_prod_profile(
    cloud_location: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("FM_") or name in ("DAGSTER_HOME", "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(name)
    for name, value in {**dockerfile_env(), **env_vars(cloud_location)}.items():
        if name.startswith("FM_") or name == "AWS_DEFAULT_REGION":
            monkeypatch.setenv(name, value)
    settings = load_settings()
    settings.validate_for_profile()
    assert settings.profile == "prod" and settings.root.startswith("s3://")
    assert settings.resolved_spark_master.startswith("spark://")
    # validate_for_profile asks for a URI only with the sql catalog; a REST catalog needs one too
    assert settings.iceberg_catalog_type in ("rest", "glue")
    assert settings.iceberg_catalog_type != "rest" or settings.iceberg_uri


def test_no_secret_is_written_inline(cloud_location: dict[str, Any]) -> None:
    k8s = cloud_location["container_context"]["k8s"]
    assert [name for name in env_vars(cloud_location) if looks_secret(name)] == []
    assert k8s["env_secrets"] == ["fm-data-platform-secrets"]


def test_container_context_makes_the_run_pod_we_mean(cloud_location: dict[str, Any]) -> None:
    context = K8sContainerContext.create_from_config(cloud_location["container_context"])
    job = construct_dagster_k8s_job(
        DagsterK8sJobConfig(
            job_image=f"{cloud_location['build']['registry']}:sha",
            dagster_home="/opt/dagster/dagster_home",
            instance_config_map="dagster-instance",
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
    assert env["SPARK_LOCAL_IP"].value_from.field_ref.field_path == "status.podIP"
    assert "fm-data-platform-secrets" in {e.secret_ref.name for e in container.env_from if e.secret_ref}
    (volume,) = pod.volumes
    (mount,) = container.volume_mounts
    assert (volume.name, mount.name) == ("fm-scratch", "fm-scratch")
    assert env["TMPDIR"].value == mount.mount_path
    assert volume.persistent_volume_claim.claim_name == "fm-spark-scratch"
    assert pod.service_account_name == "fm-dagster"
    assert container.security_context.run_as_non_root is True
    assert str(container.security_context.run_as_user) == dockerfile_user().split(":")[0]
    assert job.spec.backoff_limit == 0
    # runs get the big requests, the code server the small ones
    assert container.resources.requests == {"cpu": "2", "memory": "8Gi"}
    server = context.server_k8s_config.container_config["resources"]["requests"]
    assert server == {"cpu": "1", "memory": "3Gi"}
    # the agent sets container args only; with no ENTRYPOINT in the image they are the whole command
    assert container.command is None and container.args[:3] == ["dagster", "api", "execute_run"]
