"""The code location and the unit workers import the heavy engines (pyspark, great-expectations, pyiceberg,
lance, PyAV, matplotlib, scipy.signal) only where they are used; a stage's ``worker_modules`` are imported once by
the pool's fork server, so workers start with them and the driver never imports them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pool_helpers import HEAVY_MODULES

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY_MODULES!r} if m in sys.modules]))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_importing_the_code_location_loads_no_heavy_engine() -> None:
    assert loaded_after("import fm_assets.definitions") == []


def test_importing_every_stage_and_the_executor_loads_no_heavy_engine() -> None:
    # what a pool worker imports to run any unit: the executor and the stage modules it unpickles
    code = (
        "import fm_assets.engine.run, fm_assets.engine.pool\nfrom fm_assets.stages.registry import ALL_STAGES"
    )
    assert loaded_after(code) == []


def test_the_heavy_engines_are_still_there_when_a_stage_uses_them() -> None:
    # the probe itself can see a heavy import (the check above is not vacuous)
    code = "from fm_assets.transforms.text.validate_gx import gx_validate_records"
    assert "great_expectations" in loaded_after(code)


def test_pyav_loads_only_when_video_is_handled() -> None:
    # the stage registry (and with it every text run) imports the video modules, not PyAV itself
    assert "av" not in loaded_after("from fm_assets.stages.registry import ALL_STAGES")
    assert "av" in loaded_after(
        "from fm_assets.transforms.video.probe import VideoLimits\nVideoLimits().config()"
    )


def test_validate_units_run_their_suite_without_great_expectations() -> None:
    # validate evaluates the GX suite natively (transforms/text/validate.py): no GX in a unit's process
    code = (
        "from fm_assets.stages.validate import STAGE\nfrom fm_assets.engine.schemas import docs_table\n"
        "from fm_assets.transforms.text.validate import validate_records\nvalidate_records(docs_table([]))\n"
        "assert STAGE.worker_modules == ()"
    )
    assert loaded_after(code) == []


@pytest.mark.slow
def test_workers_start_with_the_registered_modules_and_the_driver_does_not_import_them() -> None:
    # a fresh process: the fork server reads its preload list when it starts (once per process)
    script = f"""
import json, sys
sys.path.insert(0, {str(HERE)!r})
from pool_helpers import ModulesJob
from fm_assets.engine.pool import UnitTask, dump_job, preload_in_workers, run_on_processes
from fm_assets.engine.stage import WorkUnit

if __name__ == "__main__":
    preload_in_workers(["colorsys"])
    markers = []
    tasks = [UnitTask(i, WorkUnit(f"u{{i}}", ())) for i in range(6)]
    run_on_processes("modules[b]", dump_job(ModulesJob()), tasks, 2, lambda t, m: markers.append(m), lambda n: None)
    print(json.dumps({{"parent": "colorsys" in sys.modules, "workers": [m.extra for m in markers]}}))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True, timeout=300
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["parent"] is False
    assert len(report["workers"]) == 6
    assert len({worker["pid"] for worker in report["workers"]}) >= 1
    for worker in report["workers"]:
        assert worker["loaded"] == ["colorsys"], worker


def test_the_cli_parser_loads_no_heavy_engine_and_no_torch() -> None:
    # every `fm` command builds the whole parser: fm_loader's torch (1+ s) only where a command uses it
    code = "import sys\nfrom fm_assets.cli.main import build_parser\nbuild_parser()\nassert 'torch' not in sys.modules"
    assert loaded_after(code) == []


def dagster_modules_after(code: str) -> list[str]:
    """The Dagster modules a fresh interpreter has loaded after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in sys.modules if m.split('.')[0] == 'dagster']))"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_opening_the_store_and_warming_the_workers_needs_no_dagster(tmp_path: Path) -> None:
    # every `fm` command opens the store (`fm land`, `fm report`: 0.3 s instead of 0.6 s with Dagster), and
    # `fm run` starts its workers' fork server (cli/head_start.py) before the run imports Dagster
    code = (
        "from fm_assets.cli.main import _store\nfrom fm_assets.settings import load_settings\n"
        "import fm_assets.cli.head_start\n"
        f"_store(load_settings(root={str(tmp_path)!r}))"
    )
    assert dagster_modules_after(code) == []
    assert "dagster" in dagster_modules_after("import fm_assets.cli.runner")  # the probe sees it when loaded
