"""Benchmark the media transforms on one core; prints one JSON object.

- images/s per core for validate + normalize (probe, decode, rules, pHash + dHash, resize + JPEG re-encode);
- normalize on generated camera-sized JPEGs, reduced-scale (libjpeg DCT scaling) vs full decode;
- audio-seconds/s per core for validate + normalize (probe, decode, rules, mono 16 kHz FLAC);
- pHash images/s: ours (``phash_many``, batched; ``phash64`` one at a time; ``phash_bytes`` from JPEG/PNG
  bytes) vs a plain Python loop of ``imagehash.phash`` on the same decoded images, and how often they agree.

"Per core" is items per CPU second of this single-threaded process (``time.process_time``), so other load on
the machine does not count against it; wall-clock rates are printed too. Each timing is the best of
``--repeats`` runs. Data: the real Debian media from ``fm sample-data --modality image|audio`` (``--data``,
fetched into a temporary folder when not given), falling back to the generated test fixtures when apt is
not reachable (``"source": "fixtures"`` in the output).

Usage: python bench/media.py [--data DIR] [--images 200] [--audio 300] [--repeats 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import PIL  # noqa: E402

from fm_assets.sample_data.debian import evenly_spaced  # noqa: E402
from fm_assets.transforms.audio.decode import decode_audio, probe_audio  # noqa: E402
from fm_assets.transforms.audio.resample import AudioNormalizePolicy, normalize_audio  # noqa: E402
from fm_assets.transforms.audio.rules import AudioRules, judge_audio  # noqa: E402
from fm_assets.transforms.image.decode import decode_image, probe_image  # noqa: E402
from fm_assets.transforms.image.phash import dhash64, hamming, phash64, phash_bytes, phash_many  # noqa: E402
from fm_assets.transforms.image.resize import (  # noqa: E402
    ImageResizePolicy,
    encode_image,
    normalize_image,
    resize_image,
)
from fm_assets.transforms.image.rules import ImageRules, judge_image  # noqa: E402


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(best CPU seconds, best wall seconds) over ``repeats`` calls."""
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall)


def rate(count: float, seconds: tuple[float, float]) -> dict[str, float]:
    return {"per_cpu_second": round(count / seconds[0], 1), "per_wall_second": round(count / seconds[1], 1)}


def load_media(
    data_dir: Path | None, n_images: int, n_audio: int
) -> tuple[str, list[tuple[bytes, str]], list[tuple[bytes, str]]]:
    """(source, [(image bytes, caption)], [(wav bytes, transcript)]); distinct images only."""
    if data_dir is None:
        from fm_assets.sample_data.media import fetch_media_sample_data

        data_dir = Path(tempfile.mkdtemp(prefix="fm-bench-media-"))
        fetch_media_sample_data(data_dir)
    images: dict[str, tuple[bytes, str]] = {}
    for path in sorted((data_dir / "image").rglob("*.*")) if (data_dir / "image").exists() else []:
        if path.suffix in (".png", ".jpg", ".jpeg", ".gif"):
            data = path.read_bytes()
            images.setdefault(hashlib.sha256(data).hexdigest(), (data, path.with_suffix(".txt").read_text()))
    audio = [
        (path.read_bytes(), path.with_suffix(".txt").read_text())
        for path in (sorted((data_dir / "audio").rglob("*.wav")) if (data_dir / "audio").exists() else [])
    ]
    if images and audio:
        ordered = [images[key] for key in sorted(images)]
        return "debian", evenly_spaced(ordered, n_images), evenly_spaced(audio, n_audio)
    from tests import media_fixtures as fx

    fixture_images = [(data, "a generated picture") for data in fx.image_set().values()]
    fixture_audio = [(fx.tone_wav(2.0, 8000, seed=s), "a generated prompt") for s in range(20)]
    return "fixtures", fixture_images, fixture_audio


def bench_images(images: list[tuple[bytes, str]], repeats: int) -> dict[str, Any]:
    rules, policy = ImageRules(), ImageResizePolicy()
    kept = 0

    def validate() -> None:
        nonlocal kept
        kept = 0
        for data, caption in images:
            info = probe_image(data)
            image = decode_image(data)
            kept += judge_image(image, info, caption, rules).keep
            phash64(image)
            dhash64(image)

    def normalize() -> None:
        for data, _ in images:
            normalize_image(data, policy)

    megapixels = sum(probe_image(d).width * probe_image(d).height for d, _ in images) / 1e6
    t_validate, t_normalize = timed(validate, repeats), timed(normalize, repeats)
    both = (t_validate[0] + t_normalize[0], t_validate[1] + t_normalize[1])
    return {
        "images": len(images),
        "mean_megapixels": round(megapixels / len(images), 3),
        "kept_by_default_rules": kept,
        "validate_images_per_s": rate(len(images), t_validate),
        "normalize_images_per_s": rate(len(images), t_normalize),
        "validate_plus_normalize_images_per_s": rate(len(images), both),
        "policy": policy.config(),
    }


def bench_large_jpeg(repeats: int, count: int = 8) -> dict[str, Any]:
    """normalize_image on generated 12-megapixel JPEGs (camera-sized): reduced-scale decode vs a full decode."""
    from tests import media_fixtures as fx

    photos = [fx.jpeg_image(4000, 3000, seed=100 + i) for i in range(count)]
    policy = ImageResizePolicy()

    def full_decode() -> None:
        for data in photos:
            encode_image(resize_image(decode_image(data), policy), policy.format, policy.quality)

    t_draft = timed(lambda: [normalize_image(data, policy) for data in photos], repeats)
    t_full = timed(full_decode, repeats)
    return {
        "images": count,
        "source": "generated 4000x3000 JPEG",
        "normalize_images_per_s": rate(count, t_draft),
        "full_decode_then_resize_images_per_s": rate(count, t_full),
        "speedup_cpu": round(t_full[0] / t_draft[0], 2),
    }


def bench_audio(audio: list[tuple[bytes, str]], repeats: int) -> dict[str, Any]:
    rules, policy = AudioRules(), AudioNormalizePolicy()
    seconds = sum(probe_audio(data).duration_s for data, _ in audio)
    kept = 0

    def validate() -> None:
        nonlocal kept
        kept = 0
        for data, transcript in audio:
            probe_audio(data)
            samples, sample_rate = decode_audio(data)
            kept += judge_audio(samples, sample_rate, transcript, rules).keep

    def normalize() -> None:
        for data, _ in audio:
            normalize_audio(data, policy)

    t_validate, t_normalize = timed(validate, repeats), timed(normalize, repeats)
    both = (t_validate[0] + t_normalize[0], t_validate[1] + t_normalize[1])
    return {
        "files": len(audio),
        "audio_seconds": round(seconds, 1),
        "kept_by_default_rules": kept,
        "validate_audio_seconds_per_s": rate(seconds, t_validate),
        "normalize_audio_seconds_per_s": rate(seconds, t_normalize),
        "validate_plus_normalize_audio_seconds_per_s": rate(seconds, both),
        "validate_plus_normalize_files_per_s": rate(len(audio), both),
    }


def bench_phash(images: list[tuple[bytes, str]], repeats: int) -> dict[str, Any]:
    import imagehash

    decoded = [decode_image(data) for data, _ in images]
    raw = [data for data, _ in images]
    reference = [int(str(imagehash.phash(image)), 16) for image in decoded]
    ours = [int(h) for h in phash_many(decoded)]
    distances = [hamming(a, b) for a, b in zip(ours, reference, strict=True)]
    n = len(decoded)
    t_imagehash = timed(lambda: [imagehash.phash(image) for image in decoded], repeats)
    t_many = timed(lambda: phash_many(decoded), repeats)
    t_loop = timed(lambda: [phash64(image) for image in decoded], repeats)
    t_bytes_ours = timed(lambda: [phash_bytes(data) for data in raw], repeats)
    t_bytes_ref = timed(lambda: [imagehash.phash(decode_image(data)) for data in raw], repeats)
    return {
        "images": n,
        "decoded_images": {
            "imagehash_loop_per_s": rate(n, t_imagehash),
            "phash_many_per_s": rate(n, t_many),
            "phash64_loop_per_s": rate(n, t_loop),
            "ratio_phash_many_vs_imagehash_cpu": round(t_imagehash[0] / t_many[0], 2),
        },
        "from_bytes_including_decode": {
            "imagehash_loop_per_s": rate(n, t_bytes_ref),
            "phash_bytes_per_s": rate(n, t_bytes_ours),
            "ratio_vs_imagehash_cpu": round(t_bytes_ref[0] / t_bytes_ours[0], 2),
        },
        "agreement_with_imagehash": {
            "identical": sum(d == 0 for d in distances),
            "mean_hamming": round(sum(distances) / n, 3),
            "max_hamming": max(distances),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data", type=Path, default=None, help="output folder of fm sample-data --modality all"
    )
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--audio", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    source, images, audio = load_media(args.data, args.images, args.audio)
    result = {
        "source": source,
        "pillow": PIL.__version__,
        "cpu": os.cpu_count(),
        "image_validate_normalize": bench_images(images, args.repeats),
        "large_jpeg_normalize": bench_large_jpeg(args.repeats),
        "audio_validate_normalize": bench_audio(audio, args.repeats),
        "phash": bench_phash(images, args.repeats),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
