"""fm_loader workers can run below the trainer's CPU priority (``worker_nice``), so that decode workers do not
slow its step; the trainer's own priority is untouched, the default (0) leaves the workers at the trainer's,
the batches are the same either way, and an out-of-range value is refused."""

from __future__ import annotations

import os
import sys

import pytest
from loader_helpers import make_dataset

from fm_loader import DeliveryOptions, Loader

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def children_nice() -> dict[int, int]:
    """pid -> nice value of every live child process of this one (field 19 of /proc/<pid>/stat)."""
    me, found = os.getpid(), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # fields[0] is the state, [1] the parent pid, [16] the nice value
            found[int(entry)] = int(fields[16])
    return found


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    return make_dataset(str(tmp_path_factory.mktemp("nice")), [40, 40, 40, 40], seq_len=16)


def niceness_while_iterating(dataset: str, **options: int) -> tuple[list[int], int]:
    """(the workers' nice values seen mid-epoch, this process's own) for a 2-worker loader."""
    own = os.getpriority(os.PRIO_PROCESS, 0)
    before = children_nice()  # other tests' servers may be children too: only new ones are the workers
    loader = Loader(dataset, global_batch_size=8, seed=0, num_workers=2, **options)
    it = iter(loader)
    next(it)
    next(it)  # both workers have built a batch: their worker_init_fn ran
    seen = [nice for pid, nice in children_nice().items() if pid not in before]
    rest = list(it)
    assert rest  # the epoch went on after the look
    loader.close()
    return seen, own


def test_workers_run_below_the_trainer(dataset) -> None:
    seen, own = niceness_while_iterating(dataset, worker_nice=7)
    assert len(seen) >= 2
    assert all(n == min(19, own + 7) for n in seen), (seen, own)
    assert os.getpriority(os.PRIO_PROCESS, 0) == own  # the trainer's own priority is untouched


def test_by_default_workers_keep_the_trainers_priority_and_the_batches(dataset) -> None:
    assert DeliveryOptions().worker_nice == 0
    seen, own = niceness_while_iterating(dataset)
    assert len(seen) >= 2 and all(n == own for n in seen), (seen, own)
    lowered = list(Loader(dataset, global_batch_size=8, seed=0, num_workers=2, worker_nice=5))
    same = list(Loader(dataset, global_batch_size=8, seed=0, num_workers=2, worker_nice=0))
    assert [b["sample_ids"].tolist() for b in lowered] == [b["sample_ids"].tolist() for b in same]


@pytest.mark.parametrize("bad", [-1, 20])
def test_an_out_of_range_worker_nice_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="worker_nice must be between 0 and 19"):
        DeliveryOptions(worker_nice=bad)
