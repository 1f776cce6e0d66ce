"""Fixtures of the unit-pool tests: the sample landed and run up to pii_preflag once (one worker) and the
clean filter output every variant is compared with (the loopback Spark cluster is tests/conftest.py's)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fm_assets.engine.store import ObjectStore


@pytest.fixture(scope="session")
def pool_upstream(real_sample: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root holding the sample landed and processed up to pii_preflag, in-process (filter not run)."""
    from pool_helpers import land_sample, run_chain, settings  # the pipeline's imports: only where needed

    root = tmp_path_factory.mktemp("pool-upstream") / "root"
    run_chain(land_sample(root, real_sample), settings(workers=1), until="pii_preflag")
    return root


@pytest.fixture
def upstream_copy(pool_upstream: Path, tmp_path: Path) -> Callable[[str], ObjectStore]:
    """A fresh copy of ``pool_upstream`` per call (each test mutates its own)."""

    def copy(name: str) -> ObjectStore:
        dest = tmp_path / name
        shutil.copytree(pool_upstream, dest)
        return ObjectStore(str(dest))

    return copy


@pytest.fixture(scope="session")
def clean_filter(pool_upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The fingerprint of the real filter run in-process on ``pool_upstream``: what every variant must equal."""
    from pool_helpers import fingerprint, run_one, settings

    from fm_assets.stages.filter import STAGE

    dest = tmp_path_factory.mktemp("pool-clean") / "root"
    shutil.copytree(pool_upstream, dest)
    store = ObjectStore(str(dest))
    outcome = run_one(store, STAGE, settings(workers=1))
    assert len(outcome.success.units) >= 6, "the sample should give the filter several units"
    return fingerprint(store, "filter")
