"""Helpers for the compliance tests: a store with landed batches (no pipeline run needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return ObjectStore(str(tmp_path / "root"))


@pytest.fixture
def land(store: ObjectStore, tmp_path: Path):
    """land(source, licence, namespace) -> batch id: one small JSONL file as a new batch."""
    counter = iter(range(1000))

    def _land(source: str, licence: str = "MIT", namespace: str = "cloud") -> str:
        n = next(counter)
        src = tmp_path / f"src-{n}"
        src.mkdir()
        (src / "docs.jsonl").write_text(f'{{"text": "document {n} of {source}"}}\n')
        return land_batch(
            store, src, source=source, license_id=licence, namespace=namespace, batch_id=f"b{n:03d}-{source}"
        ).batch

    return _land
