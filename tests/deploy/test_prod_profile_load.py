"""`dagster definitions validate -w workspace.yaml` (the real CLI, in a fresh process) refuses a prod profile
that could not run, naming the variable to fix, and accepts the env the Helm values give the code location.
Before Settings.validate_for_profile, a prod profile with a local root passed validation and failed at
run time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .files import REPO, literal_env

# each case starts the CLI in a new process that imports the code location (~5-10 s on 2 cores)
pytestmark = pytest.mark.slow

CATALOG = {"FM_ICEBERG_CATALOG_TYPE": "rest", "FM_ICEBERG_URI": "http://iceberg-rest.example:8181"}


def validate(env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FM_") and k != "DAGSTER_HOME"}
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env={**base, "DAGSTER_HOME": str(home), "FM_PROFILE": "prod", **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("case", "missing", "fine"),
    [("local_root", "FM_ROOT", "FM_ICEBERG_URI"), ("no_catalog_uri", "FM_ICEBERG_URI", "FM_ROOT")],
)
def test_unusable_prod_profile_fails_at_load_naming_the_variable(
    tmp_path: Path, case: str, missing: str, fine: str
) -> None:
    env = (
        {"FM_ROOT": str(tmp_path / "root"), **CATALOG}
        if case == "local_root"
        else {"FM_ROOT": "s3://fm-data-prod/platform", "FM_ICEBERG_CATALOG_TYPE": "sql"}
    )
    result = validate(env, tmp_path / "home")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "SettingsError: FM_PROFILE=prod is not usable" in output
    message = output.split("SettingsError", 1)[1].splitlines()[0]
    assert missing in message and fine not in message, message
    assert "All code locations passed validation" not in output


def test_the_helm_values_env_passes(tmp_path: Path, code_deployment: dict[str, Any]) -> None:
    env = {k: v for k, v in literal_env(code_deployment["env"]).items() if k.startswith(("FM_", "AWS_"))}
    assert env["FM_ROOT"].startswith("s3://") and env["FM_ICEBERG_URI"]
    result = validate(env, tmp_path / "home")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "All code locations passed validation" in output
