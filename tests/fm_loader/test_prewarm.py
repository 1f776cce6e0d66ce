"""Hot tier: coming shards are fetched in the background and pinned while the window still needs them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import fsspec
import pytest
from loader_helpers import collect, make_dataset

from fm_loader import Loader
from fm_loader.prewarm import Prewarmer


@pytest.fixture
def remote(tmp_path):
    local = make_dataset(str(tmp_path / "ds"), [6] * 8, seq_len=32)
    fs = fsspec.filesystem("memory")
    for root, _, files in os.walk(tmp_path / "ds"):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), tmp_path / "ds")
            fs.pipe(f"/warm/ds/{rel}", Path(os.path.join(root, name)).read_bytes())
    yield local, "memory://warm/ds/manifest.json"
    fs.rm("/warm", recursive=True)


def test_prewarming_turns_the_trainers_misses_into_hits_and_keeps_the_stream(remote, tmp_path):
    local, uri = remote
    cold = Loader(uri, global_batch_size=4, prefetch=0, cache_dir=str(tmp_path / "cold"))
    assert collect(cold) == collect(Loader(local, global_batch_size=4))
    assert cold.metrics()["cache_misses"] == 16 and cold.metrics()["cache_prewarmed"] == 0

    warm = Loader(uri, global_batch_size=4, prefetch=0, cache_dir=str(tmp_path / "warm"), prewarm_rows=48)
    ids = []
    for batch in warm:
        time.sleep(0.05)  # the trainer's step: the prewarm thread runs ahead meanwhile
        ids.extend(batch["sample_ids"].tolist())
    m = warm.metrics()
    assert ids == collect(Loader(local, global_batch_size=4))
    # each file is fetched once (by the prewarm, or by a reader that got there first); a reader that finds
    # a prewarm download still in flight waits for it and counts a miss
    first_batch_files = 2 * len(set(warm.stream.rows(0, 0, 4).shard.tolist()))  # raced by the first read
    assert 16 - first_batch_files <= m["cache_prewarmed"] <= 16
    assert m["cache_misses"] <= first_batch_files + 2
    assert m["cache_bytes_downloaded"] == cold.metrics()["cache_bytes_downloaded"]
    warm.close()  # the readers release their pins of open shards
    assert not warm.cache._pins  # and the prewarm released all of its own when the iteration ended


def test_shards_stay_pinned_until_the_trainer_passes_the_last_batch_that_needs_them(remote, tmp_path):
    _, uri = remote
    loader = Loader(uri, global_batch_size=4, prefetch=0, cache_dir=str(tmp_path / "c"), cache_budget_bytes=1)
    position = [(0, 0)]
    warmer = Prewarmer(
        loader.mixture,
        loader.seed,
        loader.cache,
        12,
        4,
        (0, 4),
        loader._next_positions(),
        lambda: position[0],
    )
    while warmer.step():
        pass
    assert warmer.warmed == [(0, 0), (0, 4), (0, 8)]  # 12 rows ahead: three batches
    needed = {}
    for start in (0, 4, 8):
        refs = loader.stream.rows(0, start, 4)
        for shard in set(refs.shard.tolist()):
            for file in loader.mixture.sources[0].shard_files(shard):
                needed[file] = (0, start)
    assert {uri: last for uri, (_, last) in warmer.pinned.items()} == needed
    assert all(os.path.exists(path) for path, _ in warmer.pinned.values())  # over budget, never evicted
    position[0] = (0, 8)  # the trainer received the first two batches
    warmer.step()
    assert all(last >= (0, 8) for _, last in warmer.pinned.values()) and (0, 12) in warmer.warmed
    warmer.stop()
    assert not warmer.pinned and not loader.cache._pins
