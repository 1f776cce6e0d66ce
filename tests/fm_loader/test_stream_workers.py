"""The global-stream property with torch DataLoader workers in the mix: for random world sizes, worker counts,
global batch sizes and resume points, the per-rank slices put back together are the single-process stream."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loader_helpers import collect, make_dataset

from fm_loader import Loader

ROWS = 97
EPOCHS = 2


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(str(tmp_path_factory.mktemp("workers")), [31, 9, 40, 17], seq_len=16)


@pytest.fixture(scope="module")
def reference(dataset):
    return [s for s in collect(Loader(dataset, global_batch_size=7, epochs=EPOCHS, prefetch=0)) if s >= 0]


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    world=st.integers(1, 16),
    local=st.integers(1, 6),
    workers=st.integers(0, 4),
    worker_ranks=st.sets(st.integers(0, 15), min_size=1, max_size=2),
    resume_gbs=st.integers(1, 24),
    resume_steps=st.integers(0, 12),
)
def test_ranks_with_workers_concatenate_to_the_single_process_stream(
    dataset, reference, world, local, workers, worker_ranks, resume_gbs, resume_steps
):
    # The resume point comes from a real run with another batch size; every rank then starts from it.
    first = Loader(dataset, global_batch_size=resume_gbs, epochs=EPOCHS, prefetch=0)
    it = iter(first)
    for _ in range(resume_steps):
        next(it, None)
    state = first.state_dict()
    consumed = state["epoch"] * ROWS + state["rows_consumed"]

    # DataLoader workers cost a process each: give them to one or two ranks, the rest build inline or with
    # the prefetch thread. Every rank must produce the same batches whichever path builds them.
    with_workers = {r % world for r in worker_ranks} if workers else set()
    per_rank = []
    for rank in range(world):
        loader = Loader(
            dataset,
            global_batch_size=world * local,
            rank=rank,
            world_size=world,
            epochs=EPOCHS,
            num_workers=workers if rank in with_workers else 0,
            prefetch=1 + rank % 2,
        )
        loader.load_state_dict(state)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # more workers than this machine's cores
            per_rank.append([b["sample_ids"].tolist() for b in loader])
        assert loader.state_dict()["epoch"] == EPOCHS
    merged = [s for step in zip(*per_rank, strict=True) for part in step for s in part if s >= 0]
    assert merged == reference[consumed:]
