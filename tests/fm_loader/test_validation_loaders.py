"""Per-dataset validation: a fixed held-out slice per source, never trained on, the same under any world size."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pytest
from loader_helpers import make_dataset

from fm_loader import Loader, validation_loaders


def row_contents(loaders: list[Loader]) -> list[bytes]:
    """The real rows the loaders yield (tokens as bytes), ranks interleaved batch by batch."""
    out = []
    for batches in zip(*loaders, strict=True):
        for batch in batches:
            ids, counts = batch["input_ids"].numpy(), batch["valid_token_count"].tolist()
            for b, sample in enumerate(batch["sample_ids"].tolist()):
                if sample >= 0:
                    out.append(ids[b, : counts[b]].tobytes())
    return out


@pytest.fixture
def mixture(tmp_path):
    web = make_dataset(str(tmp_path / "web"), [10] * 6, name="web", seed=1)
    code = make_dataset(str(tmp_path / "code"), [7] * 5, name="code", seed=2)
    return {"sources": [{"manifest": web, "weight": 2}, {"manifest": code, "weight": 1}]}


def test_each_source_has_a_slice_of_exactly_the_rows_asked_for_and_training_never_sees_it(mixture):
    slices = validation_loaders(mixture, rows_per_dataset=12, global_batch_size=4)
    assert sorted(slices) == ["code", "web"]
    held = {name: row_contents([loader]) for name, loader in slices.items()}
    assert {name: len(rows) for name, rows in held.items()} == {"web": 12, "code": 12}
    everything = {row for e in mixture["sources"] for row in row_contents([Loader(e["manifest"], 5)])}
    train = Loader(mixture, global_batch_size=5, held_out_rows=12, epochs=3)
    trained = set(row_contents([train]))
    for rows in held.values():
        assert set(rows) <= everything and not set(rows) & trained
    # whole shards are held out: web gives 2 shards (8 unused rows), code 2 shards (2 unused)
    assert train.mixture.sources[0].rows == 40 and train.mixture.sources[1].rows == 21


def test_the_slice_is_the_same_under_any_world_size_and_training_seed(mixture):
    def held(world: int, seed: int) -> dict[str, list[bytes]]:
        per_rank = [
            validation_loaders(mixture, rows_per_dataset=12, global_batch_size=4, rank=r, world_size=world)
            for r in range(world)
        ]
        trained = set(row_contents([Loader(mixture, 5, seed=seed, held_out_rows=12)]))
        out = {name: row_contents([ranks[name] for ranks in per_rank]) for name in per_rank[0]}
        assert not any(set(rows) & trained for rows in out.values())
        return out

    one = held(1, 0)
    assert held(2, 7) == one and held(4, 3) == one


def test_a_source_too_small_to_hold_out_from_is_refused_by_name(mixture):
    with pytest.raises(ValueError, match=r"source 'code' .* has 35 rows in 5 shards"):
        validation_loaders(mixture, rows_per_dataset=30, global_batch_size=4)
    with pytest.raises(ValueError, match="fixes 'seed'"):
        validation_loaders(mixture, rows_per_dataset=3, global_batch_size=4, seed=1)


def test_remote_slices_are_cached_after_the_first_pass(tmp_path):
    local = make_dataset(str(tmp_path / "ds"), [8] * 4, seq_len=32)
    fs = fsspec.filesystem("memory")
    for root, _, files in os.walk(tmp_path / "ds"):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), tmp_path / "ds")
            fs.pipe(f"/vbucket/ds/{rel}", Path(os.path.join(root, name)).read_bytes())
    remote = "memory://vbucket/ds/manifest.json"
    cache = str(tmp_path / "cache")
    first = validation_loaders(remote, rows_per_dataset=10, global_batch_size=4, cache_dir=cache)["ds"]
    rows = row_contents([first])
    assert first.metrics()["cache_misses"] == 4  # two shards: tar + index each
    again = validation_loaders(remote, rows_per_dataset=10, global_batch_size=4, cache_dir=cache)["ds"]
    assert row_contents([again]) == rows
    assert again.metrics()["cache_misses"] == 0 and again.metrics()["cache_hits"] >= 4
    local_rows = row_contents([validation_loaders(local, rows_per_dataset=10, global_batch_size=4)["ds"]])
    assert local_rows == rows
    shutil.rmtree(cache)
    fs.rm("/vbucket", recursive=True)
    assert np.all([len(r) > 0 for r in rows])


@pytest.mark.parametrize(("world_a", "world_b", "steps"), [(1, 3, 4), (2, 1, 7), (4, 2, 2)])
def test_training_without_the_slices_resumes_exactly_under_another_world_size(
    mixture, world_a, world_b, steps
):
    options = {"held_out_rows": 12, "extra_columns": {"depth": -1}, "epochs": 2, "prefetch": 0}
    reference = [s for b in Loader(mixture, 12, **options) for s in b["sample_ids"].tolist() if s >= 0]
    first = Loader(mixture, 12, rank=0, world_size=world_a, **options)
    batches = iter(first)
    for _ in range(steps):
        next(batches)
    state = first.state_dict()
    ranks = []
    for rank in range(world_b):
        loader = Loader(mixture, 12, rank=rank, world_size=world_b, **options)
        loader.load_state_dict(state)
        ranks.append([b["sample_ids"].tolist() for b in loader])
    resumed = [s for step in zip(*ranks, strict=True) for part in step for s in part if s >= 0]
    consumed = state["epoch"] * first.epoch_rows + state["rows_consumed"]
    assert consumed > 0 and resumed == reference[consumed:]


def test_a_shards_rank_depends_on_its_content_only_so_a_grown_release_keeps_the_order(tmp_path):
    from fm_loader import DatasetManifest
    from fm_loader.holdout import _ranked_shards, split_source
    from fm_loader.sources import ManifestSource

    grown = DatasetManifest.load(make_dataset(str(tmp_path / "v2"), [5] * 12, name="ds", seed=4))
    earlier = DatasetManifest.load(str(tmp_path / "v2" / "manifest.json"))
    earlier.shards = earlier.shards[:8]  # the earlier release: 8 of the same shards
    old_order = [earlier.shards[s].sha256 for s in _ranked_shards(ManifestSource(earlier))]
    new_order = [grown.shards[s].sha256 for s in _ranked_shards(ManifestSource(grown))]
    assert [h for h in new_order if h in old_order] == old_order  # the old shards keep their relative order
    # a slice is the first shards in that order (10 rows: two shards of 5), so it changes only where a new
    # shard ranks before the old slice's
    old_slice = {earlier.shards[s].sha256 for s in split_source(ManifestSource(earlier), 10)[1].shards}
    new_slice = {grown.shards[s].sha256 for s in split_source(ManifestSource(grown), 10)[1].shards}
    assert old_slice == set(old_order[:2]) and new_slice == set(new_order[:2])
