"""requirements/lock.txt against pyproject.toml and against the environment the tests run in.

The lock is what a fresh machine installs (scripts/setup.sh, CI, the Docker image): it must be the resolution
of today's pyproject.toml, keep the dagster family on one release, leave torch's CUDA build out, and be what
is actually installed.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "lock.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)")
# dagster's integration libraries are versioned 0.(minor + 16).patch beside core 1.minor.patch
DAGSTER_CORE = (
    "dagster",
    "dagster-webserver",
    "dagster-graphql",
    "dagster-pipes",
    "dagster-shared",
    "dagster-cloud-cli",
)
DAGSTER_INTEGRATIONS = ("dagster-k8s", "dagster-aws", "dagster-postgres")


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        match = PIN.match(line)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *extras["pipeline"], *extras["test"]]
    # the test extra pulls the ner extra through a self-reference
    wanted += extras["ner"]
    return [Requirement(r) for r in wanted if not r.startswith(project["name"])]


def test_lock_was_made_from_todays_pyproject() -> None:
    recorded = re.search(r"^# pyproject-dependencies-sha256: (\w+)$", LOCK.read_text(), re.M)
    assert recorded, "lock header lacks the pyproject fingerprint: regenerate it with `make lock`"
    current = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "lock_fingerprint.py"), str(REPO)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert recorded.group(1) == current, "pyproject.toml's dependencies changed: run `make lock` and commit"


def test_every_declared_requirement_is_locked_inside_its_range() -> None:
    pins = locked()
    problems = []
    for requirement in project_requirements():
        name = canonicalize_name(requirement.name)
        if (
            name == "torch"
        ):  # installed first from scripts/constraints.txt (the CPU build), never from the lock
            continue
        if name not in pins:
            problems.append(f"{requirement} is not in the lock")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{requirement} but the lock has {pins[name]}")
    assert not problems, problems


def test_the_dagster_family_is_one_release() -> None:
    pins = locked()
    core = pins["dagster"]
    major, minor, patch = (int(p) for p in core.split("."))
    assert major == 1
    for name in DAGSTER_CORE:
        assert pins[name] == core, f"{name} {pins[name]} beside dagster {core}"
    for name in DAGSTER_INTEGRATIONS:
        assert pins[name] == f"0.{minor + 16}.{patch}", f"{name} {pins[name]} beside dagster {core}"


def test_no_cuda_build_and_no_torch_in_the_lock() -> None:
    pins = locked()
    assert "torch" not in pins
    cuda = [name for name in pins if name.startswith(("nvidia-", "cuda-")) or name == "triton"]
    assert not cuda, f"CUDA packages in the lock: {cuda}"


@pytest.mark.skipif(
    not (Path(sys.prefix) / "pyvenv.cfg").exists(), reason="not running in a virtual environment"
)
def test_the_running_environment_is_the_lock() -> None:
    pins = locked()
    installed = {
        canonicalize_name(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()
    }
    different = {
        name: (version, installed.get(name))
        for name, version in pins.items()
        if installed.get(name) != version
    }
    assert not different, f"(locked, installed): {different}; run `make setup`"


def test_the_helm_chart_is_the_locked_dagster_release() -> None:
    """Dagster's chart runs the daemon and webserver images of its own version beside our code image."""
    core = locked()["dagster"]
    for path in (REPO / "deploy" / "README.md", REPO / "deploy" / "helm" / "values.yaml"):
        versions = set(re.findall(r"dagster/dagster --version (\S+)", path.read_text()))
        assert versions == {core}, f"{path.name}: chart {versions}, lock has dagster {core}"


def test_the_gpu_hosts_wheels_are_the_locked_versions() -> None:
    """bench/host_wheels.txt (what bench/host_carry.py carries to the GPU host) follows the lock: an upgrade
    that forgets it would measure the host on other versions than the ones users install."""
    pins = locked()
    listed = [
        w
        for line in (REPO / "bench" / "host_wheels.txt").read_text().splitlines()
        for w in line.split("#")[0].split()
    ]
    assert listed, "bench/host_wheels.txt lists no wheels"
    stale = {}
    for entry in listed:
        name, _, version = entry.partition("==")
        if pins.get(canonicalize_name(name)) != version:
            stale[name] = (version, pins.get(canonicalize_name(name)))
    assert not stale, f"bench/host_wheels.txt differs from requirements/lock.txt (listed, locked): {stale}"
