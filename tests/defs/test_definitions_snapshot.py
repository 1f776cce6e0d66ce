"""Snapshot of the loaded Definitions: asset keys, groups, partitions, code versions, checks and deps.

A change to the graph shows up here as a diff a reviewer reads. After an intended change, regenerate with
``FM_UPDATE_SNAPSHOT=1 pytest tests/defs/test_definitions_snapshot.py`` and commit the JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fm_assets.defs.build import build_definitions
from fm_assets.settings import load_settings

SNAPSHOT = Path(__file__).with_name("definitions_snapshot.json")


def describe(settings_root: Path) -> dict[str, Any]:
    defs = build_definitions(load_settings(root=str(settings_root), profile="local"))
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        partitions = node.partitions_def
        assets[key.to_user_string()] = {
            "group": node.group_name,
            "partitions": getattr(partitions, "name", None) if partitions else None,
            "code_version": node.code_version,
            "deps": sorted(parent.to_user_string() for parent in node.parent_keys),
            "checks": sorted(check.name for check in node.check_keys),
            "observable": node.is_observable,
        }
    jobs = {
        job.name: sorted(k.to_user_string() for k in job.asset_layer.selected_asset_keys)
        for job in defs.resolve_all_job_defs()
        if not job.name.startswith("__")
    }
    sensors = sorted(sensor.name for sensor in defs.sensors or [])
    return {"assets": assets, "jobs": jobs, "sensors": sensors}


def test_definitions_match_the_snapshot(tmp_path):
    current = describe(tmp_path)
    if os.environ.get("FM_UPDATE_SNAPSHOT") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    expected = json.loads(SNAPSHOT.read_text())
    assert current == expected, (
        "the asset graph changed; if intended, regenerate the snapshot (see module doc)"
    )
