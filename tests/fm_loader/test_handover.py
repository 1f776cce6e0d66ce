"""fm_loader.handover: batches cross through reused shared-memory slots, intact, with non-tensor values; a slot is
given back only when its tensors are unreferenced; a trainer holding every batch gets one-off segments; nothing
is left under /dev/shm."""

from __future__ import annotations

import glob
import multiprocessing
import os

import pytest
import torch
from loader_helpers import make_dataset

from fm_loader import Loader
from fm_loader.handover import _SHM_DIR, HandoverRing, ShmReceiver


def batch(k: int) -> dict[str, object]:
    return {
        "input_ids": torch.full((3, 5), k, dtype=torch.int32),
        "mask": torch.arange(7) % 2 == k % 2,
        "bucket": torch.tensor(k, dtype=torch.int64),
        "text": [f"caption {k}"],
        "scale": torch.full((2,), k / 4, dtype=torch.float32),
    }


def leftovers(ring: HandoverRing) -> list[str]:
    return glob.glob(os.path.join(_SHM_DIR, f"{ring.prefix}-*"))


def test_round_trip_and_slot_give_back() -> None:
    ring = HandoverRing(multiprocessing.get_context(), workers=1, slots=2)
    sender, receiver = ring.sender(0), ShmReceiver(ring)
    first = sender.send(batch(0))
    assert first.slot == 0 and "input_ids" not in first.rest and first.rest["text"] == ["caption 0"]
    got = receiver.receive(first)
    assert list(got) == list(batch(0))  # key order kept
    for key, value in batch(0).items():
        assert torch.equal(got[key], value) if isinstance(value, torch.Tensor) else got[key] == value
    assert not leftovers(ring)  # unlinked as soon as mapped
    held = [got, receiver.receive(sender.send(batch(1)))]
    # both slots are held by the trainer: the next batch travels in a one-off segment, the slots untouched
    third = sender.send(batch(2))
    assert third.slot == -1
    assert int(receiver.receive(third)["input_ids"][0, 0]) == 2
    assert [int(b["input_ids"][0, 0]) for b in held] == [0, 1]
    assert ring.busy[0] == ring.busy[1] == 1
    del got, held
    receiver.receive(sender.send(batch(3)))  # a hand-out checks the held slots: both are free again
    assert ring.busy[0] == ring.busy[1] == 0
    assert sender.send(batch(4)).slot == 0
    receiver.close()
    assert not leftovers(ring)


def test_a_bigger_batch_grows_its_slot() -> None:
    ring = HandoverRing(multiprocessing.get_context(), workers=1, slots=1)
    sender, receiver = ring.sender(0), ShmReceiver(ring)
    small = receiver.receive(sender.send({"x": torch.ones(4)}))
    del small
    receiver._give_back()
    big = sender.send({"x": torch.arange(10_000, dtype=torch.float64)})
    assert big.slot == 0 and big.size >= 80_000
    assert torch.equal(receiver.receive(big)["x"], torch.arange(10_000, dtype=torch.float64))
    receiver.close()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    return make_dataset(str(tmp_path_factory.mktemp("handover")), [37, 5, 61, 20], seq_len=16)


def test_a_trainer_keeping_every_worker_batch_sees_each_one_intact(dataset) -> None:
    before = set(glob.glob(os.path.join(_SHM_DIR, "fm_loader-*")))
    plain = list(Loader(dataset, global_batch_size=8, seed=3, prefetch=0))
    shm = list(Loader(dataset, global_batch_size=8, seed=3, num_workers=2, prefetch=1))
    pickled = list(Loader(dataset, global_batch_size=8, seed=3, num_workers=2, handover="pickle"))
    assert len(plain) == len(shm) == len(pickled) > 2 * 6  # more batches than the ring's slots
    for a, b, c in zip(plain, shm, pickled, strict=True):
        assert a.keys() == b.keys() == c.keys()
        for key in a:
            assert torch.equal(a[key], b[key]) and torch.equal(a[key], c[key]), key
    assert set(glob.glob(os.path.join(_SHM_DIR, "fm_loader-*"))) == before
