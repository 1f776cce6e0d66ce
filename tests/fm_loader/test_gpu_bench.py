"""bench/gpu_loader.py: without CUDA it prints a JSON reason and exits 0; its plain-torch models train on the CPU
at tiny sizes (the bench itself runs on a GPU host)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu_loader.py"


def bench_module():
    spec = importlib.util.spec_from_file_location("bench_gpu_loader", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA answer")
def test_without_cuda_the_bench_says_why_and_exits_0() -> None:
    env = {**os.environ, "PYTHONPATH": str(BENCH.parents[1])}
    done = subprocess.run([sys.executable, str(BENCH)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["skipped"].startswith("no CUDA")


@pytest.mark.slow
def test_tiny_models_learn_from_loader_shaped_batches() -> None:
    bench = bench_module()
    torch.manual_seed(0)
    vit = bench.ViTClip(width=32, layers=1, heads=2, embed=16)
    images = {
        "images": torch.randint(
            0, 256, (4, 3, 48, 32), dtype=torch.uint8
        ),  # a non-square bucket: 3 x 2 patches
        "caption_ids": torch.randint(0, 50, (4, 3), dtype=torch.int32),
        "caption_mask": torch.tensor([[1, 1, 0]] * 4, dtype=torch.bool),
    }
    dec = bench.Decoder(width=16, layers=1, heads=2, vocab=64, max_len=8)
    tokens = {
        "input_ids": torch.randint(0, 64, (2, 8), dtype=torch.int32),
        "position_ids": torch.arange(8, dtype=torch.int32).repeat(2, 1),
        "labels": torch.randint(0, 64, (2, 8), dtype=torch.int64),
    }
    for model, batch in ((vit, images), (dec, tokens)):
        step = bench.train_step(model, torch.optim.AdamW(model.parameters(), lr=3e-3), torch.device("cpu"))
        before = float(model.loss(batch).detach())
        for _ in range(15):
            step(batch)
        assert float(model.loss(batch).detach()) < before  # the step really trains
    assert (
        bench.epochs_for(steps=210, batch=64, samples=4096, slack=9) == 4
    )  # 55 full batches an epoch, 212 needed
