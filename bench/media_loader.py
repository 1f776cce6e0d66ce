"""Benchmark the media loader against webdataset's own decode pipeline on the same shards; prints one JSON object.

Usage: ``python bench/media_loader.py [--images 2000] [--shards 8] [--batch 32] [--repeats 3]``.

The shards are generated: JPEG images of mixed aspect ratios (long side 320 to 640 pixels, nine ratios from 2:5
to 5:2) with captions, written with :func:`fm_loader.media.format.encode_media_shard`. All readers run in this
one process (no worker processes), from page cache, after one warm-up pass each, and produce ``(B, 3, H, W)``
uint8 tensors:

* ``media_loader``: an epoch of ``MediaLoader(..., prefetch=0)`` (no prefetch thread, like the others;
  shuffled, checksummed, aspect-ratio bucketed: each image cropped to its bucket's ratio and resized to its
  ~256x256 shape; captions too);
* ``webdataset``: ``wds.WebDataset(urls).decode("pil").to_tuple("jpg", "txt")``, each image resized to 256x256,
  ``.batched(B)`` (in shard order, no shuffle, no checksums);
* ``webdataset_same_decode``: the same webdataset pipeline, decoding each image with the media loader's decode
  (JPEG draft mode, one crop-and-resize call): separates the decode's share of the difference from the
  pipeline's.

Timing: one pass of each reader per round, for ``--repeats`` rounds; ratios are taken within a round and the
median over rounds is reported, from wall time and from this process's CPU time (steadier on a busy machine).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # a sibling script named like a standard module must not shadow it

import argparse
import io
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fm_loader.media.decode import decode_image
from fm_loader.media.format import MediaSample, encode_media_shard
from fm_loader.media.loader import MediaLoader
from fm_loader.media.manifest import MediaManifest, MediaShardEntry

RATIOS = [(2, 5), (1, 2), (2, 3), (3, 4), (1, 1), (4, 3), (3, 2), (2, 1), (5, 2)]
SIDE = 256


def make_image(rng: np.random.Generator, index: int) -> bytes:
    from PIL import Image

    rw, rh = RATIOS[index % len(RATIOS)]
    long_side = int(rng.integers(320, 641))
    scale = long_side / max(rw, rh)
    width, height = max(16, int(rw * scale)), max(16, int(rh * scale))
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([x % 256, y % 256, (x * y) % 256], axis=-1).astype(np.int16)
    pixels += rng.integers(-20, 20, pixels.shape, dtype=np.int16)  # texture, so JPEG has work to do
    out = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(out, format="JPEG", quality=90)
    return out.getvalue()


def write_shards(folder: Path, images: int, shards: int) -> tuple[Path, list[str]]:
    rng = np.random.default_rng(0)
    per_shard = -(-images // shards)
    entries, urls = [], []
    for s in range(shards):
        lo, hi = s * per_shard, min(images, (s + 1) * per_shard)
        samples = [
            MediaSample(
                f"img{i:07d}",
                make_image(rng, i),
                "jpg",
                f"a generated picture number {i}",
                {"licence": "cc0", "provenance": {"source": "bench", "index": i}},
            )
            for i in range(lo, hi)
        ]
        enc = encode_media_shard(samples, f"shard-{s:06d}")
        for name, data in enc.files.items():
            (folder / name).write_bytes(data)
        entries.append(MediaShardEntry.from_info(enc.info))
        urls.append(str(folder / enc.info.tar_name))
    manifest = MediaManifest("bench", "v1", "image-text", "bench", entries)
    manifest.save(str(folder / "manifest.json"))
    return folder / "manifest.json", urls


def run_media_loader(manifest: Path, batch: int) -> int:
    count = 0
    with MediaLoader(manifest, batch, seed=0, prefetch=0) as loader:  # no thread: like webdataset here
        for b in loader:
            count += int(b["valid"].sum())
    return count


def run_webdataset(urls: list[str], batch: int, same_decode: bool) -> int:
    import webdataset as wds
    from PIL import Image

    def fit_same(data: bytes) -> np.ndarray:
        return decode_image(data, SIDE, SIDE).transpose(2, 0, 1)

    def fit_pil(image: Image.Image) -> np.ndarray:
        resized = image.convert("RGB").resize((SIDE, SIDE), Image.Resampling.BILINEAR)
        return np.asarray(resized).transpose(2, 0, 1)

    if same_decode:  # the media loader's decode on the raw bytes
        pipeline = wds.WebDataset(urls, shardshuffle=False).to_tuple("jpg", "txt")
        fit: Callable = fit_same
    else:
        pipeline = wds.WebDataset(urls, shardshuffle=False).decode("pil").to_tuple("jpg", "txt")
        fit = fit_pil
    pipeline = pipeline.map_tuple(fit, lambda t: t).batched(batch)
    count = 0
    for images, _texts in pipeline:
        tensor = torch.from_numpy(np.ascontiguousarray(images))
        count += tensor.shape[0]
    return count


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    n = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="fm-media-bench-") as tmp:
        t0 = time.perf_counter()
        manifest, urls = write_shards(Path(tmp), args.images, args.shards)
        write_s = time.perf_counter() - t0
        readers: dict[str, Callable[[], int]] = {
            "media_loader": lambda: run_media_loader(manifest, args.batch),
            "webdataset": lambda: run_webdataset(urls, args.batch, same_decode=False),
            "webdataset_same_decode": lambda: run_webdataset(urls, args.batch, same_decode=True),
        }
        counts = {name: fn() for name, fn in readers.items()}  # warm-up: page cache, imports
        rounds = [{name: timed(fn) for name, fn in readers.items()} for _ in range(args.repeats)]
    out: dict[str, object] = {
        "images": args.images,
        "shards": args.shards,
        "batch": args.batch,
        "processes": 1,
        "write_shards_s": round(write_s, 2),
        "images_read": counts,
        "load_avg": os.getloadavg()[0],
    }
    for name in readers:
        walls = [r[name][0] for r in rounds]
        out[name] = {
            "images_per_s": round(args.images / statistics.median(walls), 1),
            "images_per_cpu_s": round(args.images / statistics.median(r[name][1] for r in rounds), 1),
            "median_s": round(statistics.median(walls), 3),
            "best_s": round(min(walls), 3),
            "cpu_s": round(statistics.median(r[name][1] for r in rounds), 3),
        }
    for other in ("webdataset", "webdataset_same_decode"):
        out[f"ratio_vs_{other}"] = round(
            statistics.median(r[other][0] / r["media_loader"][0] for r in rounds), 2
        )
        out[f"cpu_ratio_vs_{other}"] = round(
            statistics.median(r[other][1] / r["media_loader"][1] for r in rounds), 2
        )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
