"""Input stall on a real training step: fm_loader feeding a ViT-B/16 and a small decoder on the GPU; prints JSON.

Usage: ``python bench/gpu_loader.py [--images 4096] [--long-side 1280] [--batch 64] [--steps 200]
[--workers 0,4,8,15] [--gpu-decode-workers 4] [--gpu-codecs torchvision,nvimgcodec] [--rows 16384] [--seq-len 2048] [--text-batch 16]
[--worker-nice 0,10] [--step-priority default,high] [--run-seconds S] [--skip-text]``;
``--smoke-cpu`` runs the same flow on the CPU with tiny models, images and step counts (a check of the code,
not a measurement). Without CUDA (and without ``--smoke-cpu``) it prints ``{"skipped": "no CUDA: ..."}`` and
exits 0.

Models (plain torch, no torchvision models): ``vit``: ViT-B/16 (patch 16, width 768, 12 layers, 12 heads, MLP
3072, pre-norm, 2-D sin-cos positions so every bucket shape fits) with a small caption encoder, trained with a
CLIP-style contrastive loss in bf16 autocast with AdamW; ``decoder``: a causal transformer (width 512, 8 layers,
8 heads, vocabulary 50257) trained on packed token batches (labels, loss mask).

For each model the bench first measures its **compute-only rate** on device-resident synthetic batches of the
same shapes (images: the buckets' shapes in turn), then trains ``--steps`` steps fed by the loader, for each
input path: images decoded on the CPU in process (``workers_0``) and by 4 / 8 / 15 worker processes, and decoded
on the GPU (``--gpu-codecs``: torchvision's nvJPEG decode on the SMs, and NVIDIA nvImageCodec, which uses the
hardware JPEG engines of an A100/H100/H200; ``--gpu-decode-workers`` processes read and checksum the bytes); tokens in process and with
4 workers. Every run gives its rate (``per_s``: valid images or tokens per second), ``fraction_of_compute_only``
(the step rate kept: batch slots per second against the compute-only rate of the same run; images also report
``valid_fraction``, the share of slots holding an image: a bucket's last batch of each epoch is part padding,
which a small bench dataset pays far more often than a real one), and the loader's own ``input_loss_fraction`` (from the compute-only step time handed to
``Loader.set_compute_baseline``), ``input_stall_fraction`` (wait time), ``queue_depth_mean``,
``loader_only_per_s`` (the same loader iterated without a training step: what it can feed at most; the issue's
>= 4,500 images/s target) and the mean GPU utilisation (``torch.cuda.utilization``, needs ``pynvml``; null without it). The first ``--warmup`` steps of
every run are not timed; ``--run-seconds`` ends a timed run early (``steps_timed`` says how many). Shards are generated (JPEGs of mixed aspect ratios with a long side of
``--long-side`` px; random token rows) into a temp folder and read from page cache.

Two knobs against the trainer losing its CPU or its SMs to the input path: ``--worker-nice`` runs every CPU
decode run with workers once per value (``Loader(worker_nice=)``: the workers' CPU priority below the
trainer's; runs with a non-zero value are named ``..._nice_<n>``), and ``--step-priority default,high`` runs
every GPU decode run also with the training step on a CUDA stream of the highest priority (the loader's copy
and decode stream has the lowest), named ``..._step_high``.
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # a sibling script named like a standard module must not shadow it

import argparse
import importlib.util
import io
import json
import math
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fm_loader import Loader, measure_compute_baseline
from fm_loader.media.buckets import BucketSet
from fm_loader.media.format import MediaSample, encode_media_shard
from fm_loader.media.manifest import MediaManifest, MediaShardEntry

RATIOS = [(2, 5), (1, 2), (2, 3), (3, 4), (1, 1), (4, 3), (3, 2), (2, 1), (5, 2)]
VOCAB = 50257


# -- models ---------------------------------------------------------------------------------------------------
def sincos_2d(rows: int, cols: int, width: int, device: torch.device) -> torch.Tensor:
    """Fixed 2-D sin-cos position embeddings, ``(rows * cols, width)``."""
    quarter = width // 4
    omega = 1.0 / (10000 ** (torch.arange(quarter, device=device, dtype=torch.float32) / quarter))
    y, x = torch.meshgrid(
        torch.arange(rows, device=device, dtype=torch.float32),
        torch.arange(cols, device=device, dtype=torch.float32),
        indexing="ij",
    )
    y, x = y.reshape(-1, 1) * omega, x.reshape(-1, 1) * omega
    return torch.cat([x.sin(), x.cos(), y.sin(), y.cos()], dim=1)


def encoder(width: int, layers: int, heads: int, mlp: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        width, heads, mlp, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    )
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class ViTClip(nn.Module):
    """A ViT image encoder and a small caption encoder, trained contrastively (CLIP-style)."""

    def __init__(
        self, width: int = 768, layers: int = 12, heads: int = 12, patch: int = 16, embed: int = 512
    ):
        super().__init__()
        self.patch, self.width = patch, width
        self.patchify = nn.Conv2d(3, width, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.blocks = encoder(width, layers, heads, 4 * width)
        self.norm = nn.LayerNorm(width)
        self.image_proj = nn.Linear(width, embed, bias=False)
        self.tokens = nn.Embedding(65536, 256)
        self.text = encoder(256, 2, 4, 1024)
        self.text_proj = nn.Linear(256, embed, bias=False)
        self.scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
        self._positions: dict[tuple[int, int], torch.Tensor] = {}

    def images(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float().div_(127.5).sub_(1.0)
        x = self.patchify(x)  # (B, width, h, w)
        rows, cols = x.shape[-2:]
        key = (rows, cols)
        if key not in self._positions:
            self._positions[key] = sincos_2d(rows, cols, self.width, x.device)
        x = x.flatten(2).transpose(1, 2) + self._positions[key].to(x.dtype)
        x = torch.cat([self.cls.expand(len(x), -1, -1).to(x.dtype), x], dim=1)
        return self.image_proj(self.norm(self.blocks(x))[:, 0])

    def captions(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if ids.shape[1] == 0:
            ids, mask = ids.new_zeros((len(ids), 1)), mask.new_ones((len(ids), 1))
        x = self.text(self.tokens(ids.long()), src_key_padding_mask=~mask)
        pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.text_proj(pooled)

    def loss(self, batch: dict[str, Any]) -> torch.Tensor:
        a = nn.functional.normalize(self.images(batch["images"]), dim=-1)
        b = nn.functional.normalize(self.captions(batch["caption_ids"], batch["caption_mask"]), dim=-1)
        logits = self.scale.exp() * a @ b.t()
        target = torch.arange(len(a), device=a.device)
        return (
            nn.functional.cross_entropy(logits, target) + nn.functional.cross_entropy(logits.t(), target)
        ) / 2


class Decoder(nn.Module):
    """A small causal transformer language model."""

    def __init__(
        self, width: int = 512, layers: int = 8, heads: int = 8, vocab: int = VOCAB, max_len: int = 8192
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(max_len, width)
        self.blocks = encoder(width, layers, heads, 4 * width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def loss(self, batch: dict[str, Any]) -> torch.Tensor:
        ids = batch["input_ids"].long()
        x = self.embed(ids) + self.pos(batch["position_ids"].long().clamp(max=self.pos.num_embeddings - 1))
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], device=ids.device)
        x = self.head(self.norm(self.blocks(x, mask=mask, is_causal=True)))
        return nn.functional.cross_entropy(
            x.flatten(0, 1).float(), batch["labels"].flatten(), ignore_index=-100
        )


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device
) -> Callable[[Any], None]:
    dtype = torch.bfloat16

    def step(batch: dict[str, Any]) -> None:
        with torch.autocast(device.type, dtype=dtype):
            loss = model.loss(batch)  # type: ignore[operator]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


# -- data -----------------------------------------------------------------------------------------------------
def make_jpeg(rng: np.random.Generator, index: int, long_side: int) -> bytes:
    from PIL import Image

    rw, rh = RATIOS[index % len(RATIOS)]
    side = int(long_side * rng.uniform(0.8, 1.0))
    width, height = max(16, side * rw // max(rw, rh)), max(16, side * rh // max(rw, rh))
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([(x + index) % 256, y % 256, ((x // 7) * (y // 5)) % 256], axis=-1).astype(np.int16)
    pixels += rng.integers(-12, 12, pixels.shape, dtype=np.int16)
    out = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(out, format="JPEG", quality=85)
    return out.getvalue()


def _image_shard(job: tuple[int, int, int, int]) -> tuple[dict[str, bytes], Any, list[int]]:
    """One shard's samples (seeded by the shard: the same bytes whatever the process count)."""
    s, start, stop, long_side = job
    rng = np.random.default_rng(s)
    samples, sizes = [], []
    for i in range(start, stop):
        data = make_jpeg(rng, i, long_side)
        sizes.append(len(data))
        meta = {"licence": "cc0", "provenance": {"source": "bench"}, "caption_tokens": [i % 997, 5, 9, 2]}
        samples.append(MediaSample(f"img{i:07d}", data, "jpg", f"picture {i}", meta))
    enc = encode_media_shard(samples, f"shard-{s:06d}")
    return enc.files, enc.info, sizes


def write_images(folder: Path, images: int, long_side: int, shards: int = 16) -> tuple[str, float]:
    from concurrent.futures import ProcessPoolExecutor

    per = -(-images // shards)
    jobs = [(s, s * per, min(images, (s + 1) * per), long_side) for s in range(shards)]
    entries, sizes = [], []
    with ProcessPoolExecutor(max_workers=min(shards, os.cpu_count() or 1)) as pool:
        for files, info, shard_sizes in pool.map(_image_shard, jobs):
            for name, data in files.items():
                (folder / name).write_bytes(data)
            entries.append(MediaShardEntry.from_info(info))
            sizes += shard_sizes
    MediaManifest("bench", "v1", "image-text", "bench", entries).save(str(folder / "manifest.json"))
    return str(folder / "manifest.json"), float(np.mean(sizes))


def write_tokens(folder: Path, rows: int, seq_len: int) -> str:
    spec = importlib.util.spec_from_file_location("bench_loader", Path(__file__).with_name("loader.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    manifest, _ = module.build(str(folder), rows, seq_len, 16)
    return manifest


# -- measuring ------------------------------------------------------------------------------------------------
class Utilisation:
    """Mean GPU utilisation sampled every 100 ms while running (None without pynvml or CUDA)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Utilisation:
        if torch.cuda.is_available():
            try:
                torch.cuda.utilization()
            except Exception:  # pynvml missing or unusable: report null
                return self
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.samples.append(float(torch.cuda.utilization()))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return round(float(np.mean(self.samples)), 1) if self.samples else None


def epochs_for(steps: int, batch: int, samples: int, slack: int) -> int:
    """Epochs that hold at least ``steps`` batches (an epoch's last batch of each bucket may be short: ``slack``)."""
    per_epoch = max(1, samples // batch - slack)
    return -(-(steps + 2) // per_epoch)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def synthetic_rate(
    step: Callable[[Any], None],
    batches: list[dict[str, Any]],
    units: Callable[[dict[str, Any]], Any],
    steps: int,
) -> tuple[float, float]:
    """(units/s, seconds per step) of ``step`` on device-resident batches, taken in turn."""
    seconds = measure_compute_baseline(
        lambda b: [step(x) for x in b], batches, steps=max(1, steps // len(batches))
    )
    per_step = seconds / len(batches)
    return sum(int(units(b)) for b in batches) / len(batches) / per_step, per_step


def loader_run(
    loader: Loader,
    step: Callable[[Any], None],
    units: Callable[[dict[str, Any]], Any],
    steps: int,
    warmup: int,
    baseline_s: float,
    device: torch.device,
    max_seconds: float | None = None,
    slots: Callable[[dict[str, Any]], int] | None = None,
    high_priority_step: bool = False,
) -> dict[str, Any]:
    """Train ``steps`` steps (or ``max_seconds``) fed by ``loader``. ``slots(batch)``: the units a full batch
    holds (images: the batch size); a bucket's last batch of an epoch is part padding, which the compute-only
    rate (full synthetic batches) does not pay, so the step-rate comparison counts slots, not valid units.
    ``high_priority_step``: the steps (and the hand-over, which makes the current stream wait for each batch)
    run on a CUDA stream of the highest priority."""
    if high_priority_step and device.type == "cuda":
        high = torch.cuda.Stream.priority_range()[1]  # pyright: ignore[reportCallIssue] - a staticmethod
        with torch.cuda.stream(torch.cuda.Stream(device=device, priority=high)):
            return loader_run(loader, step, units, steps, warmup, baseline_s, device, max_seconds, slots)
    loader.set_compute_baseline(baseline_s)
    it: Iterator[dict[str, Any]] = iter(loader)
    for _ in range(warmup):
        step(next(it))
    sync(device)
    loader.reset_metrics()
    count: Any = 0  # summed where the batches are: int() of a CUDA tensor would wait for the GPU every step
    with Utilisation() as util:
        t0 = time.perf_counter()
        done = 0
        filled = 0
        for done in range(1, steps + 1):  # noqa: B007 - the step count is reported
            batch = next(it)
            count = count + units(batch)
            filled += slots(batch) if slots is not None else 0
            step(batch)
            if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
                break
        sync(device)
        seconds = time.perf_counter() - t0
    count = int(count)
    m = loader.metrics()
    close = getattr(it, "close", None)
    if close is not None:
        close()
    loader.close()
    return {
        "per_s": round(count / seconds, 1),
        "slots_per_s": round(filled / seconds, 1) if slots is not None else None,
        "valid_fraction": round(count / filled, 4) if slots is not None and filled else None,
        "input_loss_fraction": round(m.get("input_loss_fraction", float("nan")), 4),
        "input_stall_fraction": round(m["input_stall_fraction"], 4),
        "queue_depth_mean": round(m["queue_depth_mean"], 2),
        "step_ms": round(1000 * m["step_s_mean"], 2),
        "steps_timed": done,
        "gpu_utilisation_mean": util.mean,
    }


def loader_only(
    loader: Loader,
    units: Callable[[dict[str, Any]], Any],
    steps: int,
    warmup: int,
    device: torch.device,
    max_seconds: float | None = None,
) -> float:
    """Units/s of the loader alone (batches on the device, no training step): what it can feed at most."""
    it = iter(loader)
    for _ in range(warmup):
        next(it)
    sync(device)
    count: Any = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        count = count + units(next(it))  # a device tensor: no host sync per batch
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            break
    sync(device)
    seconds = time.perf_counter() - t0
    count = int(count)
    close = getattr(it, "close", None)
    if close is not None:
        close()
    loader.close()
    return round(count / seconds, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--long-side", type=int, default=1280)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--workers", default="0,4,8,15")
    parser.add_argument(
        "--gpu-decode-workers", default="4", help="worker counts (comma-separated) of the GPU decode runs"
    )
    parser.add_argument(
        "--gpu-codecs",
        default="torchvision,nvimgcodec",
        help="GPU JPEG codecs to run (a codec not installed is reported as skipped)",
    )
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--text-batch", type=int, default=16)
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=None,
        help="stop each timed run after this many seconds (fewer than --steps steps; reported as steps_timed)",
    )
    parser.add_argument(
        "--worker-nice", default="0", help="Loader(worker_nice=) values of the CPU decode runs with workers"
    )
    parser.add_argument(
        "--step-priority",
        default="default",
        help="'default' and/or 'high': the CUDA stream priority of the training step in GPU decode runs",
    )
    parser.add_argument("--skip-text", action="store_true", help="only the image-text model")
    parser.add_argument(
        "--smoke-cpu", action="store_true", help="tiny models and data on the CPU: checks the code"
    )
    args = parser.parse_args()
    if not torch.cuda.is_available() and not args.smoke_cpu:
        print(json.dumps({"skipped": f"no CUDA: torch {torch.__version__} sees no GPU; run on a GPU host"}))
        return
    if args.smoke_cpu:
        args.images, args.long_side, args.batch, args.steps, args.warmup = 96, 160, 8, 4, 1
        args.workers, args.rows, args.seq_len, args.text_batch = "0,2", 128, 64, 4
    device = torch.device("cuda" if not args.smoke_cpu else "cpu")
    loader_device = "cuda" if not args.smoke_cpu else None
    buckets = (
        BucketSet.for_area(256 * 256, multiple=16) if not args.smoke_cpu else BucketSet.for_area(48 * 48, 16)
    )
    torch.manual_seed(0)
    out: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else "cpu (smoke test, not a measurement)",
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "batch": args.batch,
        "steps": args.steps,
    }
    with tempfile.TemporaryDirectory(prefix="fm-bench-gpu-") as tmp:
        image_dir, text_dir = Path(tmp) / "images", Path(tmp) / "text"
        image_dir.mkdir()
        text_dir.mkdir()
        manifest, mean_bytes = write_images(image_dir, args.images, args.long_side)
        out["images"] = {
            "count": args.images,
            "mean_jpeg_bytes": round(mean_bytes),
            "long_side": args.long_side,
        }

        # image-text: ViT-B/16 (tiny in the smoke test)
        vit = ViTClip() if not args.smoke_cpu else ViTClip(width=64, layers=2, heads=4, embed=32)
        vit = vit.to(device)
        step = train_step(
            vit, torch.optim.AdamW(vit.parameters(), lr=1e-4, fused=device.type == "cuda"), device
        )
        synthetic = [
            {
                "images": torch.randint(0, 256, (args.batch, 3, h, w), dtype=torch.uint8, device=device),
                "caption_ids": torch.randint(0, 997, (args.batch, 4), dtype=torch.int32, device=device),
                "caption_mask": torch.ones((args.batch, 4), dtype=torch.bool, device=device),
            }
            for h, w in buckets.shapes
        ]
        compute_rate, compute_s = synthetic_rate(step, synthetic, lambda b: len(b["images"]), args.steps)
        runs: dict[str, Any] = {}
        nices = [int(k) for k in args.worker_nice.split(",") if k]
        configs = [
            (f"cpu_decode_workers_{n}" + (f"_nice_{k}" if k else ""), int(n), "cpu", "auto", k, False)
            for n in args.workers.split(",")
            if n
            for k in (nices if int(n) > 0 else [0])
        ]
        configs += [
            (
                f"gpu_decode_{codec}_workers_{n}" + ("_step_high" if high else ""),
                int(n),
                "gpu",
                codec,
                0,
                high,
            )
            for codec in args.gpu_codecs.split(",")
            if codec
            for n in str(args.gpu_decode_workers).split(",")
            for high in [p == "high" for p in args.step_priority.split(",") if p]
        ]
        image_epochs = epochs_for(args.steps + args.warmup, args.batch, args.images, slack=len(buckets))
        for name, workers, decode, codec, nice, high in configs:
            if decode == "gpu" and device.type != "cuda":
                runs[name] = {"skipped": "GPU decode needs CUDA"}
                continue

            def image_loader(
                workers: int = workers, decode: str = decode, codec: str = codec, nice: int = nice
            ) -> Loader:
                return Loader(
                    manifest,
                    args.batch,
                    seed=0,
                    epochs=image_epochs,
                    num_workers=workers,
                    buckets=buckets,
                    device=loader_device,
                    image_decode=decode,
                    jpeg_codec=codec,
                    max_caption_tokens=4,
                    worker_nice=nice,
                )

            try:
                loader = image_loader()
            except ValueError as exc:  # image_decode="gpu" without a working GPU codec (torchvision missing)
                runs[name] = {"skipped": str(exc)}
                continue
            valid = lambda b: b["valid"].sum()  # noqa: E731 - a device tensor, summed without a sync
            run = loader_run(
                loader,
                step,
                valid,
                args.steps,
                args.warmup,
                compute_s,
                device,
                args.run_seconds,
                slots=lambda b: len(b["valid"]),
                high_priority_step=high,
            )
            # the step rate kept (batch slots/s against full synthetic batches): what input costs the trainer
            run["fraction_of_compute_only"] = round(run["slots_per_s"] / compute_rate, 4)
            run["loader_only_per_s"] = loader_only(
                image_loader(), valid, args.steps, args.warmup, device, args.run_seconds
            )
            runs[name] = run
        out["vit_b16_image_text"] = {
            "unit": "images",
            "compute_only_per_s": round(compute_rate, 1),
            "compute_only_step_ms": round(1000 * compute_s, 2),
            "runs": runs,
        }
        del vit, step, synthetic
        if device.type == "cuda":
            torch.cuda.empty_cache()

        if args.skip_text:
            print(json.dumps(out, indent=1))
            return
        # tokens: a small decoder
        text_manifest = write_tokens(text_dir, args.rows, args.seq_len)
        dec = (
            Decoder()
            if not args.smoke_cpu
            else Decoder(width=32, layers=1, heads=2, vocab=VOCAB, max_len=args.seq_len)
        )
        dec = dec.to(device)
        step = train_step(
            dec, torch.optim.AdamW(dec.parameters(), lr=1e-4, fused=device.type == "cuda"), device
        )
        first = next(iter(Loader(text_manifest, args.text_batch, seed=0)))
        resident = [{k: v.to(device) for k, v in first.items() if isinstance(v, torch.Tensor)}]
        tokens = lambda b: b["valid_token_count"].sum()  # noqa: E731 - a device tensor, no sync
        compute_rate, compute_s = synthetic_rate(step, resident, tokens, args.steps)
        runs = {}
        text_epochs = epochs_for(args.steps + args.warmup, args.text_batch, args.rows, slack=1)
        for workers in (0, 4 if not args.smoke_cpu else 2):
            loader = Loader(
                text_manifest,
                args.text_batch,
                seed=0,
                epochs=text_epochs,
                num_workers=workers,
                device=loader_device,
            )
            run = loader_run(
                loader, step, tokens, args.steps, args.warmup, compute_s, device, args.run_seconds
            )
            run["fraction_of_compute_only"] = round(run["per_s"] / compute_rate, 4)
            run["loader_only_per_s"] = loader_only(
                Loader(
                    text_manifest,
                    args.text_batch,
                    seed=0,
                    epochs=text_epochs,
                    num_workers=workers,
                    device=loader_device,
                ),
                tokens,
                args.steps,
                args.warmup,
                device,
                args.run_seconds,
            )
            runs[f"workers_{workers}"] = run
        out["decoder_tokens"] = {
            "unit": "tokens",
            "compute_only_per_s": round(compute_rate, 1),
            "compute_only_step_ms": round(1000 * compute_s, 2),
            "runs": runs,
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
