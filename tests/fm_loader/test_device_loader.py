"""Loader(device=...): host batches unchanged without CUDA, and the device hand-out path (run on the CPU through a
host transfer) keeps order, contents, state and metrics at the trainer's ``next()``; CUDA checks where a GPU is."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from loader_helpers import make_dataset

import fm_loader.loader as loader_module
from fm_loader import DeliveryOptions, Loader
from fm_loader.device import DeviceFeeder, HostTransfer

CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    return make_dataset(str(tmp_path_factory.mktemp("device")), [37, 5, 61, 20], seq_len=16)


def run(loader: Loader, stop: int | None = None) -> list[tuple[dict[str, torch.Tensor], dict[str, Any]]]:
    """(a host copy of each batch, the state right after receiving it), up to ``stop`` batches."""
    out = []
    for k, batch in enumerate(loader):
        host = {key: v.cpu().clone() for key, v in batch.items() if isinstance(v, torch.Tensor)}
        out.append((host, loader.state_dict()))
        if stop is not None and k + 1 == stop:
            break
    return out


def same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for (ba, sa), (bb, sb) in zip(a, b, strict=True):
        assert sa == sb
        assert ba.keys() == bb.keys()
        for key in ba:
            assert ba[key].dtype == bb[key].dtype and torch.equal(ba[key], bb[key]), key


@pytest.mark.skipif(CUDA, reason="checks the no-CUDA behaviour of device='auto'")
@pytest.mark.parametrize("prefetch", [0, 2])
def test_device_none_and_auto_without_cuda_are_todays_host_batches(dataset, prefetch, caplog) -> None:
    plain = run(Loader(dataset, global_batch_size=8, seed=3, prefetch=prefetch))
    with caplog.at_level("INFO", logger="fm_loader.device"):
        auto = Loader(dataset, global_batch_size=8, seed=3, prefetch=prefetch, device="auto")
    assert auto.device is None
    assert "no CUDA device" in caplog.text
    same(plain, run(Loader(dataset, global_batch_size=8, seed=3, prefetch=prefetch, device=None)))
    same(plain, run(auto))
    grouped = Loader(dataset, global_batch_size=8, seed=3, prefetch=prefetch, delivery=DeliveryOptions())
    same(plain, run(grouped))


@pytest.mark.skipif(CUDA, reason="checks the refusal without CUDA")
def test_an_explicit_cuda_device_without_cuda_is_refused(dataset) -> None:
    with pytest.raises(ValueError, match=r"device='cuda:0'.*device='auto'"):
        Loader(dataset, global_batch_size=8, device="cuda:0")


def test_bad_delivery_options_are_refused(dataset) -> None:
    with pytest.raises(ValueError, match="device_prefetch must be >= 1"):
        Loader(dataset, global_batch_size=8, device_prefetch=0)
    with pytest.raises(ValueError, match="image_decode must be one of"):
        Loader(dataset, global_batch_size=8, image_decode="nvjpeg")


class HostDeviceLoader(Loader):
    """The device hand-out path with a host transfer standing in for CUDA (its copies are clones)."""

    def _transfer(self, device: torch.device):
        return HostTransfer()


@pytest.fixture
def host_device(monkeypatch) -> None:
    real = loader_module.resolve_device
    monkeypatch.setattr(
        loader_module, "resolve_device", lambda device: torch.device("cpu") if device else real(device)
    )


@pytest.mark.parametrize(("prefetch", "workers"), [(0, 0), (2, 0), (2, 2)])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_device_path_keeps_order_contents_and_state_at_the_trainers_next(
    dataset, host_device, prefetch, workers, depth
) -> None:
    plain = run(Loader(dataset, global_batch_size=8, seed=3, prefetch=prefetch))
    fed = HostDeviceLoader(
        dataset,
        global_batch_size=8,
        seed=3,
        prefetch=prefetch,
        num_workers=workers,
        device="cuda",
        device_prefetch=depth,
    )
    assert fed.device is not None
    # the feeder runs `depth` batches ahead, yet the state after each received batch is the plain loader's
    same(plain, run(fed))
    assert fed.metrics()["batches"] == len(plain)


def test_device_path_resumes_mid_epoch_like_the_host_path(dataset, host_device) -> None:
    first = HostDeviceLoader(dataset, global_batch_size=8, seed=3, device="cuda", device_prefetch=2)
    head = run(first, stop=5)
    state = head[-1][1]
    assert state["rows_consumed"] == 40  # 5 batches received, not 5 + the 2 in flight
    resumed = HostDeviceLoader(dataset, global_batch_size=4, seed=3, world_size=2, rank=1, device="cuda")
    resumed.load_state_dict(state)
    reference = Loader(dataset, global_batch_size=4, seed=3, world_size=2, rank=1)
    reference.load_state_dict(state)
    same(run(reference), run(resumed))


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (this torch build has none)")
def test_loader_device_batches_are_bit_identical_on_the_gpu(dataset) -> None:
    plain = run(Loader(dataset, global_batch_size=8, seed=3))
    on_gpu = Loader(dataset, global_batch_size=8, seed=3, device="cuda")
    first = next(iter(Loader(dataset, global_batch_size=8, seed=3, device="cuda")))
    assert all(v.is_cuda for v in first.values() if isinstance(v, torch.Tensor))
    same(plain, run(on_gpu))


def test_an_error_while_looking_ahead_is_raised_at_its_own_batch() -> None:

    def prepare(batch: dict[str, Any], tag: Any) -> dict[str, Any]:
        if tag == 2:
            raise ValueError("batch 2 does not decode")
        return batch

    items = ((({"x": torch.full((2,), k)}, k)) for k in range(6))
    feeder = DeviceFeeder(items, HostTransfer(), depth=3, prepare=prepare, tagged=True)
    assert [tag for _, tag in (next(feeder), next(feeder))] == [0, 1]  # batch 2 was prepared already
    with pytest.raises(ValueError, match="batch 2 does not decode"):
        next(feeder)


def test_the_threaded_feeder_keeps_order_and_raises_errors_at_their_batch() -> None:

    def prepare(batch: dict[str, Any], tag: Any) -> dict[str, Any]:
        if tag == 7:
            raise ValueError("batch 7 does not decode")
        return batch

    def items():
        buffer = torch.empty(4, dtype=torch.int64)  # reused, like the loader's pooled buffers
        for k in range(10):
            buffer.fill_(k)
            yield {"x": buffer}, k

    feeder = DeviceFeeder(items(), HostTransfer(), depth=2, prepare=prepare, tagged=True, threaded=True)
    got = [next(feeder) for _ in range(7)]
    assert [tag for _, tag in got] == list(range(7))
    assert [int(b["x"][0]) for b, _ in got] == list(range(7))  # staged copies, not views of the reused buffer
    with pytest.raises(ValueError, match="batch 7 does not decode"):
        next(feeder)
    feeder.close()
