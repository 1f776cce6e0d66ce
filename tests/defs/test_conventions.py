"""Every asset of the code location keeps the Dagster conventions (defs/conventions.py): an owner, layer tags,
kinds for where it computes and what it writes, the chain as the group name, and the column schema of
every stage's output; the loaded Definitions are what the UI and `dg`-style tooling read."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from dagster import TableSchema

from fm_assets.defs.build import build_definitions
from fm_assets.defs.conventions import CHAIN_TAG, COLUMN_SCHEMA, LAYER_TAG, OWNER
from fm_assets.settings import load_settings
from fm_assets.stages.registry import CHAINS

COMPUTE_KINDS = {"python", "spark"}
STORAGE_KINDS = {"parquet", "iceberg", "lance", "webdataset", "json"}


def test_every_asset_has_an_owner_tags_and_kinds(tmp_path) -> None:
    graph = build_definitions(load_settings(root=str(tmp_path), profile="local")).resolve_asset_graph()
    keys = list(graph.get_all_asset_keys())
    assert len(keys) >= 28
    for key in keys:
        node = graph.get(key)
        assert node.owners == [OWNER], key
        assert node.tags.get(LAYER_TAG) in {"stage", "side_input", "release", "view"}, key
        assert node.kinds & STORAGE_KINDS, (key, node.kinds)  # what it writes
        assert node.description, key
    for key in ("curated_documents", "documents_lance", "media_lance", "dataset_release"):
        kinds = graph.get(next(k for k in keys if k.to_user_string() == key)).kinds
        assert kinds & {"iceberg", "lance", "webdataset"}, (key, kinds)


def test_chain_names_are_group_names_and_stages_carry_their_schema(tmp_path) -> None:
    graph = build_definitions(load_settings(root=str(tmp_path), profile="local")).resolve_asset_graph()
    by_name = {key.to_user_string(): graph.get(key) for key in graph.get_all_asset_keys()}
    for chain, stages in CHAINS.items():
        for stage in stages:
            node = by_name[stage.name]
            assert node.group_name == chain and node.tags[CHAIN_TAG] == chain, stage.name
            assert node.kinds & COMPUTE_KINDS and "parquet" in node.kinds, stage.name
            schema = node.metadata[COLUMN_SCHEMA]
            assert isinstance(schema, TableSchema)
            assert isinstance(stage.output_schema, pa.Schema)
            assert [c.name for c in schema.columns] == stage.output_schema.names, stage.name


def test_the_local_code_location_is_named_as_in_dagster_cloud() -> None:
    import yaml
    from dagster._core.workspace.load import location_origins_from_yaml_paths

    repo = Path(__file__).resolve().parents[2]
    (local,) = location_origins_from_yaml_paths([str(repo / "workspace.yaml")])
    (cloud,) = yaml.safe_load((repo / "dagster_cloud.yaml").read_text())["locations"]
    assert local.location_name == cloud["location_name"] == "fm-data-platform"
