"""Fixtures: the parsed deployment files."""

from __future__ import annotations

from typing import Any

import pytest

from .files import DEPLOY, REPO, load_yaml


@pytest.fixture(scope="session")
def helm_values() -> dict[str, Any]:
    return load_yaml(DEPLOY / "helm" / "values.yaml")


@pytest.fixture(scope="session")
def code_deployment(helm_values: dict[str, Any]) -> dict[str, Any]:
    """The one user code deployment of the Helm values (the FM code location)."""
    deployments = helm_values["dagster-user-deployments"]["deployments"]
    assert len(deployments) == 1
    return deployments[0]


@pytest.fixture(scope="session")
def instance_yaml() -> dict[str, Any]:
    return load_yaml(DEPLOY / "dagster.yaml")


@pytest.fixture(scope="session")
def cloud_location() -> dict[str, Any]:
    locations = load_yaml(REPO / "dagster_cloud.yaml")["locations"]
    assert len(locations) == 1
    return locations[0]
