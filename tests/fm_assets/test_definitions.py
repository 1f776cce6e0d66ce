"""The code location loads as `dagster dev` loads it, and the prod profile runs steps as Kubernetes jobs."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

from fm_assets.defs.build import build_definitions
from fm_assets.stages.registry import STAGE_NAMES

REPO = Path(__file__).resolve().parents[2]


def test_workspace_validates_with_the_dagster_cli(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", str(REPO / "workspace.yaml")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Validation successful" in result.stderr + result.stdout


def test_graph_shape_and_profiles():
    local = build_definitions("local")
    graph = local.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert set(STAGE_NAMES) <= keys and "dataset_release" in keys
    by_name = {key.to_user_string(): key for key in graph.get_all_asset_keys()}
    for before, after in pairwise(STAGE_NAMES):  # every stage depends on exactly the previous one
        assert {key.to_user_string() for key in graph.get(by_name[after]).parent_keys} == {before}
    prod = build_definitions("prod")
    assert prod.resolve_job_def("preprocess").executor_def.name == "k8s"
