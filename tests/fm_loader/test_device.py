"""fm_loader.device: device selection, staging-ring rotation, prefetch depth and order (CPU), and the CUDA path
bit-identical to host batches where a GPU exists."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from loader_helpers import make_dataset

from fm_loader import Loader
from fm_loader.device import DeviceFeeder, HostTransfer, resolve_device, to_device

CUDA = torch.cuda.is_available()


def test_device_selection() -> None:
    assert resolve_device(None) is None
    assert resolve_device("cpu") is None
    if CUDA:
        assert resolve_device("auto") == torch.device("cuda", torch.cuda.current_device())
    else:
        assert resolve_device("auto") is None
        with pytest.raises(ValueError, match=r"device='cuda:0'.*is_available\(\) is False.*device='auto'"):
            resolve_device("cuda:0")


def reused_buffer_batches(count: int, shape: tuple[int, ...] = (4, 8)) -> Iterator[dict[str, object]]:
    """Like the loader: every batch is written into the same tensor, so a feeder that kept a reference
    instead of copying would hand out the last values for every batch."""
    buffer = torch.empty(shape, dtype=torch.int32)
    for k in range(count):
        buffer.fill_(k)
        yield {"input_ids": buffer, "step": k, "text": [f"caption {k}"]}


def test_order_contents_and_non_tensor_values_are_kept() -> None:
    out = list(DeviceFeeder(reused_buffer_batches(7), HostTransfer(), depth=2))
    assert [b["step"] for b in out] == list(range(7))
    assert [int(b["input_ids"].unique().item()) for b in out] == list(range(7))
    assert out[3]["text"] == ["caption 3"]


class CountingSource:
    def __init__(self, count: int) -> None:
        self.pulled = 0
        self._batches = reused_buffer_batches(count)

    def __iter__(self) -> CountingSource:
        return self

    def __next__(self) -> dict[str, object]:
        batch = next(self._batches)
        self.pulled += 1
        return batch


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_prefetch_depth_is_the_number_of_batches_in_flight(depth: int) -> None:
    source = CountingSource(10)
    feeder = DeviceFeeder(source, HostTransfer(), depth=depth)
    next(feeder)
    assert source.pulled == depth  # the one handed out plus depth - 1 still copying
    next(feeder)
    assert source.pulled == depth + 1


class RecordingFence:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name, self.done = log, name, False

    def synchronize(self) -> None:
        self.done = True
        self.log.append(f"sync {self.name}")


class RecordingTransfer(HostTransfer):
    """Copies whose fences only complete when waited on; records every staging write."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []
        self.fences: list[RecordingFence] = []

    def copy_to_device(self, staged: torch.Tensor) -> torch.Tensor:
        self.log.append(f"copy {len(self.fences)}")  # one tensor per batch here: the batch's index
        return super().copy_to_device(staged)

    def hand_over(self, fence, tensors) -> None:
        pass  # like CUDA: the consumer's stream waits on the device, the host does not block

    def fence(self) -> RecordingFence:
        fence = RecordingFence(self.log, str(len(self.fences)))
        self.fences.append(fence)
        return fence


def test_a_staging_buffer_is_rewritten_only_after_its_copy_finished() -> None:
    transfer = RecordingTransfer()
    feeder = DeviceFeeder(reused_buffer_batches(9), transfer, depth=2)
    out = list(feeder)
    assert [b["step"] for b in out] == list(range(9))
    # 3 slots (depth + 1) for the one key and shape, whatever the number of batches
    assert feeder.staging_buffers == 3
    # batch k's buffer is reused by batch k + 3: the fence of batch k is waited on before that copy starts
    for k in range(9 - 3):
        assert transfer.log.index(f"sync {k}") < transfer.log.index(f"copy {k + 3}"), transfer.log


def test_one_ring_per_shape_for_bucketed_batches() -> None:
    def bucketed() -> Iterator[dict[str, object]]:
        for k in range(12):
            shape = (2, 3, 224, 288) if k % 2 else (2, 3, 256, 256)
            yield {"images": torch.full(shape, k, dtype=torch.uint8)}

    feeder = DeviceFeeder(bucketed(), HostTransfer(), depth=2)
    out = list(feeder)
    assert [int(b["images"][0, 0, 0, 0]) for b in out] == list(range(12))
    assert feeder.staging_buffers == 2 * 3


def test_batches_of_a_new_shape_each_time_do_not_pile_up_staging_buffers() -> None:
    """Audio batches are padded to their own longest clip: a new shape nearly every batch. The pinned staging
    buffers stay bounded (least recently used rings dropped, after their copies ended) and every batch is
    still its own."""

    def padded_per_batch() -> Iterator[dict[str, object]]:
        for k in range(200):
            yield {"audio": torch.full((2, 100 + k), float(k)), "lengths": torch.full((2,), k)}

    transfer = RecordingTransfer()
    feeder = DeviceFeeder(padded_per_batch(), transfer, depth=2)
    feeder._ring.max_rings = 8
    out = list(feeder)
    assert [int(b["audio"][0, 0]) for b in out] == list(range(200))
    assert all(b["audio"].shape == (2, 100 + k) for k, b in enumerate(out))
    assert feeder.staging_buffers <= 8 * 3
    assert len(feeder._ring._rings) <= 8 and len(feeder._ring._next) <= 8
    # the fixed-shape key keeps its ring (used every batch, never the least recent): 3 slots, reused
    assert len(feeder._ring._rings[("lengths", torch.Size([2]), torch.int64)]) == 3
    # an evicted ring's last copies were waited on before its buffers were let go
    for k in range(150):
        assert f"sync {k}" in transfer.log


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth must be >= 1"):
        DeviceFeeder([], HostTransfer(), depth=0)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (this torch build has none)")
def test_token_batches_on_the_gpu_are_bit_identical_to_host_batches(tmp_path) -> None:
    manifest = make_dataset(str(tmp_path), [37, 5, 61, 20], seq_len=16)

    def loader() -> Loader:
        return Loader(manifest, global_batch_size=8, seed=3, expected_tokenizer_hash="tok-test")

    host = [{k: v.clone() for k, v in b.items() if isinstance(v, torch.Tensor)} for b in loader()]
    device = list(to_device(loader(), "cuda"))
    assert len(device) == len(host)
    for h, d in zip(host, device, strict=True):
        for key, value in h.items():
            assert d[key].is_cuda
            assert torch.equal(d[key].cpu(), value), key
