"""The loader's global-stream guarantees, as properties over random world sizes, batch sizes and resumes."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from loader_helpers import collect, make_dataset

from fm_loader import Loader
from fm_loader.order import Interleave, SourceOrder

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(str(tmp_path_factory.mktemp("stream")), [37, 5, 61, 20, 44, 13], seq_len=16)


def single_stream(path: str, epochs: int = 1, gbs: int = 16) -> list[int]:
    return [s for s in collect(Loader(path, global_batch_size=gbs, epochs=epochs, prefetch=0)) if s >= 0]


def ranks_stream(
    path: str, world: int, local: int, start_state: dict | None = None, epochs: int = 1
) -> list[int]:
    """Interleave the per-rank slices of every global batch back into one stream."""
    per_rank = []
    for rank in range(world):
        loader = Loader(path, global_batch_size=world * local, rank=rank, world_size=world, epochs=epochs)
        if start_state:
            loader.load_state_dict(start_state)
        per_rank.append([b["sample_ids"].tolist() for b in loader])
    merged = [s for step in zip(*per_rank, strict=True) for part in step for s in part]
    return [s for s in merged if s >= 0]


@SETTINGS
@given(world=st.integers(1, 16), local=st.integers(1, 9))
def test_ranks_concatenate_to_the_single_process_stream(dataset, world, local):
    assert ranks_stream(dataset, world, local) == single_stream(dataset)


def test_epoch_has_every_row_once_and_epochs_repermute(dataset):
    two = single_stream(dataset, epochs=2)
    rows = 180
    first, second = two[:rows], two[rows:]
    assert sorted(first) == sorted(second) == sorted(set(first)) and len(first) == rows
    assert first != second


@SETTINGS
@given(
    world_a=st.integers(1, 8),
    world_b=st.integers(1, 16),
    local_a=st.integers(1, 6),
    local_b=st.integers(1, 6),
    steps=st.integers(0, 30),
)
def test_resume_under_another_world_size_continues_exactly(
    dataset, world_a, world_b, local_a, local_b, steps
):
    reference = single_stream(dataset, epochs=2)
    gbs = world_a * local_a
    loader = Loader(dataset, global_batch_size=gbs, rank=0, world_size=world_a, epochs=2, prefetch=1)
    it = iter(loader)
    for _ in range(steps):
        if next(it, None) is None:
            break
    state = json.loads(json.dumps(loader.state_dict()))  # must survive JSON
    assert set(state) == {"format", "fingerprint", "seed", "epoch", "rows_consumed"}
    consumed = state["epoch"] * 180 + state["rows_consumed"]
    assert ranks_stream(dataset, world_b, local_b, state, epochs=2) == reference[consumed:]


def test_torch_workers_keep_the_global_order(dataset):
    reference = single_stream(dataset)
    for workers in (1, 2, 4):
        loader = Loader(dataset, global_batch_size=10, num_workers=workers)
        assert [s for s in collect(loader) if s >= 0] == reference
        assert loader.state_dict()["epoch"] == 1


def test_resume_with_workers_and_seek_cost_does_not_replay(dataset):
    loader = Loader(dataset, global_batch_size=8, num_workers=2)
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.state_dict()
    del it
    resumed = Loader(dataset, global_batch_size=12, num_workers=3)
    resumed.load_state_dict(state)
    assert [s for s in collect(resumed) if s >= 0] == single_stream(dataset)[40:]


def test_batch_shapes_never_change_and_last_batch_is_padded(dataset):
    loader = Loader(dataset, global_batch_size=32, world_size=2, rank=1)
    shapes = {tuple((k, tuple(v.shape), str(v.dtype)) for k, v in b.items()) for b in loader}
    assert len(shapes) == 1
    last = list(Loader(dataset, global_batch_size=32))[-1]
    assert (last["sample_ids"] == -1).sum() == 32 - 180 % 32
    assert int(last["valid_token_count"][last["sample_ids"] == -1].sum()) == 0


def test_state_from_another_dataset_or_seed_is_refused(dataset, tmp_path):
    other = make_dataset(str(tmp_path), [10], seq_len=16, seed=9)
    state = Loader(other, global_batch_size=4).state_dict()
    with pytest.raises(ValueError, match="another stream"):
        Loader(dataset, global_batch_size=4).load_state_dict(state)
    with pytest.raises(ValueError, match="another stream"):
        Loader(dataset, global_batch_size=4, seed=1).load_state_dict(
            Loader(dataset, global_batch_size=4).state_dict()
        )


def test_hierarchical_shuffle_keeps_rows_inside_windows():
    shard_rows = np.array([100] * 20)
    order = SourceOrder(shard_rows, seed=3, source_index=0, window_rows=250)
    shards, rows = order.locate(np.arange(2000))
    assert len(set(zip(shards.tolist(), rows.tolist(), strict=True))) == 2000
    # The first window is 3 whole shards (300 rows >= 250): its 300 positions use exactly 3 shards.
    assert len(set(shards[:300].tolist())) == 3
    assert len(set(shards[:100].tolist())) > 1  # rows are shuffled across the window's shards


@SETTINGS
@given(counts=st.lists(st.integers(1, 3000), min_size=2, max_size=5), window=st.integers(200, 2000))
@example(counts=[1, 1, 1, 1, 797], window=200)  # tiny sources once lagged a whole block behind their share
def test_mixture_shares_hold_in_every_window(counts, window):
    inter = Interleave(counts, block=256)
    # blocks only bound memory: any block size gives the same global merge
    assert np.array_equal(
        inter.items(0, inter.total)[0], Interleave(counts, block=7).items(0, inter.total)[0]
    )
    src, k = inter.items(0, inter.total)
    for i, c in enumerate(counts):
        assert np.array_equal(k[src == i], np.arange(c))  # each source's rows appear in order, all of them
    total = inter.total
    # each prefix's share error is at most 0.5 * max(1, n - 1) rows (rows tied on key across n sources), so a
    # window, the difference of two prefixes, is off by at most max(1, n - 1) whatever its size
    bound = max(1, len(counts) - 1) + 1e-9
    for start in range(0, total - window + 1, max(1, window // 2)):
        got = Counter(src[start : start + window].tolist())
        for i, c in enumerate(counts):
            assert abs(got.get(i, 0) - window * c / total) <= bound, (i, start)
    # Seeking to any position gives the same continuation.
    for start in (0, 1, total // 3, total - 1):
        s2, k2 = inter.items(start, 300)
        assert np.array_equal(s2, src[start : start + 300]) and np.array_equal(k2, k[start : start + 300])


def test_mixture_yaml_weights_choose_and_tiled_upsampling(tmp_path):
    make_dataset(str(tmp_path / "a"), [30, 30], seq_len=16, name="a")
    make_dataset(str(tmp_path / "b"), [10], seq_len=16, name="b", seed=4)
    (tmp_path / "mix.yaml").write_text(
        "sources:\n  - manifest: a/manifest.json\n    choose: 60\n  - manifest: b/manifest.json\n    choose: 25\n"
    )
    ids = [s for s in collect(Loader(str(tmp_path / "mix.yaml"), global_batch_size=5)) if s >= 0]
    per_source = Counter(s >> 48 for s in ids)
    assert per_source == {0: 60, 1: 25}
    b_rows = Counter(s for s in ids if s >> 48 == 1)
    assert sorted(b_rows.values()) == [2] * 5 + [3] * 5  # two whole passes plus half a third
    (tmp_path / "w.yaml").write_text(
        "epoch_rows: 100\nsources:\n  - manifest: a/manifest.json\n    weight: 3\n"
        "  - manifest: b/manifest.json\n    weight: 1\n"
    )
    ids = [s for s in collect(Loader(str(tmp_path / "w.yaml"), global_batch_size=10)) if s >= 0]
    assert Counter(s >> 48 for s in ids) == {0: 75, 1: 25}
