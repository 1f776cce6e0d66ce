"""``FM_LANCE_VIEWS=false``: both Lance view assets materialize as skipped, write nothing and never import lance
(what lets a host without the lance package run the text pipeline and its release)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from dagster import build_asset_context
from fm_assets.defs.resources.lance import LanceResource
from fm_assets.defs.resources.object_store import ObjectStoreResource
from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.defs.views import documents_lance, media_lance

root = sys.argv[1]
out = {}
for asset in (documents_lance, media_lance):
    resources = {
        "store": ObjectStoreResource(root=root),
        "lance": LanceResource(root=root),
        "pipeline": PipelineConfigResource(lance_views=sys.argv[2] == "on"),
    }
    with build_asset_context(resources=resources) as context:
        try:
            result = asset(context)
            out[asset.key.to_user_string()] = {
                "skipped": str(result.metadata.get("skipped", "")),
                "version": result.data_version.value if result.data_version else None,
            }
        except Exception as exc:
            out[asset.key.to_user_string()] = {"error": type(exc).__name__}
print(json.dumps({"assets": out, "lance_imported": "lance" in sys.modules}))
"""


def run_assets(root: Path, views: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(root), views],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_lance_views_off_skip_both_views_without_importing_lance(tmp_path: Path) -> None:
    report = run_assets(tmp_path, "off")
    assert report["lance_imported"] is False
    for name in ("documents_lance", "media_lance"):
        assert report["assets"][name]["skipped"].startswith("FM_LANCE_VIEWS=false"), report
        assert report["assets"][name]["version"] == "lance-views-off"
    assert not (tmp_path / "lance").exists()


def test_with_lance_views_on_the_same_assets_import_lance(tmp_path: Path) -> None:
    report = run_assets(tmp_path, "on")  # an empty root: nothing to write, but the view code runs
    assert report["lance_imported"] is True
    assert all("skipped" not in a or not a["skipped"] for a in report["assets"].values()), report
