"""The code location loads as `dagster dev` loads it, and the prod profile runs steps as Kubernetes jobs."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

from fm_assets.defs.build import build_definitions
from fm_assets.settings import load_settings
from fm_assets.stages.registry import CHAIN_NAMES

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
    local = build_definitions(load_settings(profile="local"))
    graph = local.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert set(CHAIN_NAMES["text"]) <= keys and "dataset_release" in keys
    by_name = {key.to_user_string(): key for key in graph.get_all_asset_keys()}
    side_inputs = {"tokenizer", "blocklists", "eval_registry", "quality_model"}
    for before, after in pairwise(CHAIN_NAMES["text"]):  # every stage depends on exactly the previous one
        parents = {key.to_user_string() for key in graph.get(by_name[after]).parent_keys}
        assert parents - side_inputs == {before}
    # side inputs are upstream of exactly the stages whose keys they change
    for stage, side_input in (
        ("tokenize", "tokenizer"),
        ("blocklist", "blocklists"),
        ("decontaminate", "eval_registry"),
        ("filter", "quality_model"),
    ):
        assert side_input in {key.to_user_string() for key in graph.get(by_name[stage]).parent_keys}
    # the tokenizer reads the text it may train on after both stages that hold it (documents, else captions)
    tokenizer_parents = {key.to_user_string() for key in graph.get(by_name["tokenizer"]).parent_keys}
    assert tokenizer_parents == {"decontaminate", "media_land"}
    prod = build_definitions(
        load_settings(profile="prod", root="s3://bucket/fm", iceberg_uri="postgresql+psycopg2://catalog/fm")
    )
    assert prod.resolve_job_def("preprocess").executor_def.name == "k8s"


def test_code_location_and_gx_import_in_a_process_without_a_main_file(tmp_path):
    """Dagster's run and step workers import the code location with no ``__main__`` file. pyspark's Spark
    Connect module (reached through great-expectations) then called ``sys.exit(0)`` when its gRPC extras were
    missing, so every UI/sensor run died before its first step. Both imports must survive that state."""
    code = (
        "import fm_assets.definitions\nimport fm_assets.transforms.text.validate_gx\nprint('IMPORTED OK')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path), "FM_ROOT": str(tmp_path / "root")},
    )
    assert result.returncode == 0 and "IMPORTED OK" in result.stdout, result.stderr[-2000:]
