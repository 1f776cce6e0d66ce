"""Upstream verification runs where the files are read: the driver checks presence and sizes and rehashes
only the upstream files no unit reads; each unit rehashes its own inputs (in a worker when there are
workers), and a same-size bit flip in one of them fails the stage naming the file, committing nothing for
that unit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pool_helpers import BATCH, committed_units, run_one, settings

from fm_assets.engine import layout
from fm_assets.engine.integrity import DamagedDataError
from fm_assets.engine.refs import read_success
from fm_assets.engine.run import StageRun, resolve_upstream, verify_upstream
from fm_assets.engine.stage import units_from_parts
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.filter import STAGE as FILTER

UpstreamCopy = Callable[[str], ObjectStore]


def flip_bit(path: Path, offset: int = 200) -> None:
    data = bytearray(path.read_bytes())
    data[min(offset, len(data) - 1)] ^= 0x01
    path.write_bytes(bytes(data))


class CountingStore(ObjectStore):
    """The store, recording every file it hashes."""

    hashed: list[str]

    def sha256(self, rel: str) -> str:
        self.hashed.append(rel)
        return super().sha256(rel)


def test_the_driver_rehashes_only_what_no_unit_reads(upstream_copy: UpstreamCopy) -> None:
    store = upstream_copy("driver")
    counting = CountingStore(store.root)
    counting.hashed = []
    upstream = read_success(store, "pii_preflag", BATCH)
    stage_input = resolve_upstream(store, FILTER, BATCH)
    assert stage_input is not None
    units = units_from_parts(stage_input)
    assert len(units) >= 6
    run = StageRun(counting, stage="filter", batch=BATCH, code_version="x", config={}, input_versions={})
    verify_upstream(run, counting, upstream, units)
    parts = set(upstream.parts)
    assert set(run.upstream_files) == parts  # every part a unit reads, with the sha256 its writer recorded
    for rel, sha in run.upstream_files.items():
        assert upstream.files[rel.removeprefix(upstream.prefix + "/")]["sha256"] == sha
    assert not parts & set(counting.hashed)  # ... and none of them was read here
    assert set(upstream.rejects) <= set(counting.hashed)  # the rejects no unit reads were


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_a_unit_finds_its_damaged_input_and_commits_nothing(
    upstream_copy: UpstreamCopy, workers: int
) -> None:
    store = upstream_copy(f"w{workers}")
    upstream = read_success(store, "pii_preflag", BATCH)
    damaged = upstream.parts[len(upstream.parts) // 2]
    flip_bit(store.local_path(damaged))  # same size: only a rehash sees it
    with pytest.raises(DamagedDataError) as caught:
        run_one(store, FILTER, settings(workers=workers))
    message = str(caught.value)
    assert damaged in message and f"fm repair {BATCH} --stage pii_preflag" in message
    assert "filter[b-pool] input" in message
    prefixes = list((Path(store.root) / "stages" / "filter" / BATCH).glob("*"))
    assert len(prefixes) == 1
    prefix = str(prefixes[0].relative_to(store.root))
    assert layout.unit_of_part(damaged) not in committed_units(store, prefix)
    assert not store.exists(layout.success_marker(prefix))
