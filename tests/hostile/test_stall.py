"""Issue 18 item 7: a batch stamped earlier but landed later makes `fm run` of the later batch wait at dedup;
the wait says what it waits for, and ends with a clear message when no run is processing that batch."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fm_assets.cli.main import main
from fm_assets.defs import stage_assets
from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_ref
from fm_assets.engine.store import ObjectStore

pytestmark = [pytest.mark.slow]


def test_a_batch_landed_late_is_named_while_waited_for_and_the_wait_is_bounded(
    fm_env: Path, real_sample: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FM_NEAR_DEDUP", "0")  # the wait happens at dedup; no Spark needed
    monkeypatch.setattr(stage_assets, "PENDING_FIRST_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(stage_assets, "NOBODY_RUNNING_GRACE_SECONDS", 0.3)  # the budget stays ~2 h
    store = ObjectStore(str(fm_env))
    packages = [Path(real_sample["dest"]) / name for name in sorted(real_sample["packages"])]
    later = land_batch(store, packages[0], source="docs-b", license_id="MIT", namespace="cloud").batch
    stamped = dt.datetime.now(dt.timezone.utc) - dt.timedelta(
        hours=1
    )  # its landing started first, ended last
    earlier = land_batch(
        store, packages[-1], source="docs-a", license_id="MIT", namespace="cloud", now=stamped
    ).batch
    assert earlier < later

    assert main(["run", later, "--no-release"]) == 1
    err = capsys.readouterr().err
    waits = [line for line in err.splitlines() if "waits for earlier landed batch(es)" in line]
    assert waits and all(earlier in line and "No run is processing them" in line for line in waits), err
    assert f"batch {later} failed" in err and "Gave up after waiting" in err and f"fm run {earlier}" in err
    assert read_ref(store, "dedup", later) is None and read_ref(store, "filter", later) is not None

    assert main(["run", later, earlier, "--no-release"]) == 0  # named in any order, run in id order: no wait
    assert "waits for earlier" not in capsys.readouterr().err
    assert read_ref(store, "shard", later) is not None
