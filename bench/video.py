"""Benchmark the video path on the CPU; prints one JSON object.

- ``validate_clip_keyframes``: probe (``media_validate``) + clip windows + keyframe strips (``media_clip``) per
  distinct video: clips/s and video-seconds per CPU-second (``time.process_time``, so other load on the
  machine does not count) and per wall-second;
- ``near_dup_recall``: every distinct video re-encoded at 3/4 size in another codec; the share of its clips
  whose keyframe pHashes are within ``max_distance`` of the original clip's by the mean over aligned
  keyframes (what ``media_near_dedup`` decides), and the share of clip pairs of *different* videos within it
  (false matches); the same two shares by the max over keyframes and by the middle keyframe alone, for
  comparison; and ``trimmed_copy``: the share of a start-trimmed copy's clips that pair with any clip of
  their original (near-dup compares aligned windows, so a trim shifts every window: see docs/architecture.md);
- ``loader_cpu``: the clips written as a video-text release and read with ``fm_loader.Loader``: keyframes
  (frames) and samples per second, decoded on the CPU; ``loader_gpu``: the same with ``device="cuda"``, the
  keyframe strips decoded by the GPU image path (nvJPEG), when CUDA and torchvision are present (else the
  reason it was skipped).

Options: ``--store-clips`` (``FM_VIDEO_STORE_CLIPS=1``: each clip also re-encoded and stored, its bytes counted
beside the strips' and carried into the loader's release, which then yields ``clips``) and ``--cuts shots``
(``FM_VIDEO_CUTS=shots``: windows cut at shot boundaries first); the policy used is in the JSON.

Data: the real GNOME help videos of ``fm sample-data --modality video`` (``--data``, fetched into a
temporary folder when not given), falling back to generated test videos when apt is not reachable
(``"source": "fixtures"``). Each timing is the best of ``--repeats`` runs.

Usage: python bench/video.py [--data DIR] [--videos 12] [--repeats 2] [--store-clips] [--cuts fixed|shots]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import av  # noqa: E402
import numpy as np  # noqa: E402

from fm_assets.transforms.dedup.image_near_dup import (  # noqa: E402
    ImageNearDupConfig,
    is_near,
    position_distances,
)
from fm_assets.transforms.video.clips import FIXED, SHOTS, STRIP_EXT, Clip, ClipPolicy, extract_clips  # noqa: E402
from fm_assets.transforms.video.probe import VideoLimits, probe_video  # noqa: E402

LIMITS = VideoLimits()
TRIM_S = 3.0  # the trimmed copy's cut: not a multiple of the window nor of the keyframe spacing
VIDEO_SUFFIXES = (".webm", ".ogv", ".mp4", ".mkv", ".mov")


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """(best CPU seconds, best wall seconds, the last result) over ``repeats`` calls."""
    cpu, wall, result = [], [], None
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        result = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return min(cpu), min(wall), result


def load_videos(data: Path | None, limit: int) -> tuple[str, list[bytes]]:
    """Distinct video files (by sha256) of the sample data, at most ``limit``."""
    if data is None:
        from fm_assets.sample_data.media import fetch_media_sample_data

        data = Path(tempfile.mkdtemp(prefix="fm-bench-video-"))
        fetch_media_sample_data(data, modalities=("video",))
    found: dict[str, bytes] = {}
    for path in sorted(data.rglob("*")):
        if path.suffix.lower() in VIDEO_SUFFIXES:
            blob = path.read_bytes()
            found.setdefault(hashlib.sha256(blob).hexdigest(), blob)
    if found:
        return "debian", list(found.values())[:limit]
    from tests import video_fixtures as fx

    return "fixtures", [fx.clip_video(12.0, 320, 240, fps=10, seed=s) for s in range(limit)]


def validate_and_clip(videos: list[bytes], policy: ClipPolicy) -> list[list[Clip]]:
    out = []
    for blob in videos:
        info = probe_video(blob, LIMITS)
        out.append(extract_clips(blob, info.duration_s, policy))
    return out


def bench_validate_clip(
    videos: list[bytes], repeats: int, policy: ClipPolicy
) -> tuple[dict[str, Any], list[list[Clip]]]:
    seconds = sum(probe_video(v, LIMITS).duration_s for v in videos)
    cpu, wall, clips = timed(lambda: validate_and_clip(videos, policy), repeats)
    flat = [c for video in clips for c in video]
    count = len(flat)
    return {
        "videos": len(videos),
        "video_seconds": round(seconds, 2),
        "clips": count,
        "clips_per_cpu_s": round(count / cpu, 2),
        "clips_per_wall_s": round(count / wall, 2),
        "video_seconds_per_cpu_s": round(seconds / cpu, 2),
        "strip_bytes": sum(len(c.strip) for c in flat),
        "stored_clips": sum(c.clip is not None for c in flat),
        "stored_clip_bytes": sum(len(c.clip or b"") for c in flat),
        "policy": policy.config(),
    }, clips


def reencode(blob: bytes, scale: float = 0.75, trim_s: float = 0.0) -> bytes:
    """The video decoded and encoded again at ``scale`` of its size as VP8 WebM (even sides), without its
    first ``trim_s`` seconds."""
    out = io.BytesIO()
    with av.open(io.BytesIO(blob), mode="r") as src, av.open(out, mode="w", format="webm") as dst:
        stream = src.streams.video[0]
        rate = stream.average_rate or 10
        width = max(16, int(stream.codec_context.width * scale) // 2 * 2)
        height = max(16, int(stream.codec_context.height * scale) // 2 * 2)
        enc = dst.add_stream("libvpx", rate=rate)
        enc.width, enc.height, enc.pix_fmt = width, height, "yuv420p"
        enc.time_base = stream.time_base  # keep every frame's time: clip windows must cut the same moments
        enc.options = {"b": "800k"}
        first_pts: int | None = None
        for packet in src.demux(stream):
            if packet.size == 0 and packet.pts is not None:
                continue
            for frame in packet.decode():
                if frame.pts is None or (frame.time or 0.0) < trim_s:
                    continue
                first_pts = frame.pts if first_pts is None else first_pts
                scaled = frame.reformat(width=width, height=height, format="yuv420p")
                scaled.pts, scaled.time_base = frame.pts - (first_pts if trim_s else 0), frame.time_base
                for out_packet in enc.encode(scaled):
                    dst.mux(out_packet)
        for out_packet in enc.encode():
            dst.mux(out_packet)
    return out.getvalue()


def bench_near_dup(videos: list[bytes], originals: list[list[Clip]], policy: ClipPolicy) -> dict[str, Any]:
    max_distance = ImageNearDupConfig().max_distance
    rules: dict[str, Callable[[tuple[int, ...]], bool]] = {
        "mean": lambda d: is_near(d, max_distance),
        "max": lambda d: max(d) <= max_distance,
        "middle_keyframe": lambda d: d[len(d) // 2] <= max_distance,
    }
    copies: list[tuple[int, ...]] = []
    for blob, clips in zip(videos, originals, strict=True):
        copy = reencode(blob)
        for a, b in zip(
            clips, extract_clips(copy, probe_video(copy, LIMITS).duration_s, policy), strict=False
        ):
            copies.append(position_distances(list(a.phashes), list(b.phashes)) or ())
    flat = [(v, list(c.phashes)) for v, clips in enumerate(originals) for c in clips]
    cross = [
        position_distances(a, b) or ()
        for i, (va, a) in enumerate(flat)
        for vb, b in flat[i + 1 :]
        if va != vb
    ]

    def share(pairs: list[tuple[int, ...]], rule: Callable[[tuple[int, ...]], bool]) -> float | None:
        return round(sum(rule(d) for d in pairs) / len(pairs), 4) if pairs else None

    # a copy trimmed at the start: does each of its clips pair with *any* clip of its original?
    trimmed = matched = 0
    for blob, clips in zip(videos, originals, strict=True):
        copy = reencode(blob, trim_s=TRIM_S)
        for b in extract_clips(copy, probe_video(copy, LIMITS).duration_s, policy):
            trimmed += 1
            matched += any(
                is_near(position_distances(list(a.phashes), list(b.phashes)), max_distance) for a in clips
            )

    return {
        "copy": "3/4 size, re-encoded VP8 WebM",
        "max_distance": max_distance,
        "rule": "mean Hamming distance over aligned keyframes",
        "clip_pairs": len(copies),
        "recall": share(copies, rules["mean"]),
        "mean_distance_median": float(np.median([sum(d) / len(d) for d in copies])) if copies else None,
        "different_video_pairs": len(cross),
        "false_match_rate": share(cross, rules["mean"]),
        "trimmed_copy": {
            "copy": f"first {TRIM_S} s cut off, then as above",
            "clips": trimmed,
            "recall_any_clip_of_its_video": round(matched / trimmed, 4) if trimmed else None,
        },
        "other_rules": {
            name: {"recall": share(copies, rule), "false_match_rate": share(cross, rule)}
            for name, rule in rules.items()
            if name != "mean"
        },
    }


def bench_loader(clips: list[list[Clip]], repeats: int, device: str | None = None) -> dict[str, Any]:
    from fm_loader import Loader
    from fm_loader.media.format import MediaSample, encode_media_shard
    from fm_loader.media.manifest import MediaManifest, MediaShardEntry

    samples = [
        MediaSample(
            f"c{v:03d}x{c.index:03d}",
            c.strip,
            STRIP_EXT,
            f"clip {c.index} of video {v}",
            {"licence": "CC-BY-SA-3.0", "provenance": {"video": v}, "keyframes": c.keyframes},
            clip=c.clip,
        )
        for v, video in enumerate(clips)
        for c in video
    ]
    folder = Path(tempfile.mkdtemp(prefix="fm-bench-video-release-"))
    encoded = encode_media_shard(samples, "shard-000000")
    for name, data in encoded.files.items():
        (folder / name).write_bytes(data)
    manifest = MediaManifest(
        name="bench-video-text",
        version="v1",
        modality="video-text",
        code_version="bench",
        shards=[MediaShardEntry.from_info(encoded.info)],
    )
    manifest.save(str(folder / "manifest.json"))

    def read_all() -> tuple[int, int, str, int]:
        frames = count = clip_bytes = 0
        with Loader(str(folder / "manifest.json"), 8, seed=0, prefetch=0, device=device) as loader:
            for batch in loader:
                valid = batch["frame_mask"]
                frames += int(valid.sum())
                count += int(batch["valid"].sum())
                clip_bytes += sum(len(c) for c in batch.get("clips") or [] if c)
            decode = loader.image_decode_mode
        if device is not None:
            import torch

            torch.cuda.synchronize()
        return frames, count, decode, clip_bytes

    cpu, wall, (frames, count, decode, clip_bytes) = timed(read_all, repeats)
    return {
        "samples": count,
        "frames": frames,
        "frames_per_cpu_s": round(frames / cpu, 1),
        "frames_per_wall_s": round(frames / wall, 1),
        "samples_per_wall_s": round(count / wall, 1),
        "clip_bytes_read": clip_bytes,
        "global_batch_size": 8,
        "decode": "gpu (nvJPEG)" if decode == "gpu" else "cpu (Pillow JPEG)",
    }


def bench_loader_gpu(clips: list[list[Clip]], repeats: int) -> dict[str, Any]:
    """``bench_loader`` on a CUDA device with the GPU image decode, or why it was skipped."""
    import torch

    from fm_loader.media.gpu_decode import jpeg_codec

    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device"}
    if jpeg_codec() is None:
        return {"skipped": "torchvision (GPU JPEG decode) is not installed"}
    return bench_loader(clips, repeats, device="cuda")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--data", type=Path, default=None, help="output folder of fm sample-data --modality video"
    )
    parser.add_argument("--videos", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--store-clips",
        action="store_true",
        help="also re-encode and store each clip (FM_VIDEO_STORE_CLIPS=1)",
    )
    parser.add_argument("--cuts", choices=(FIXED, SHOTS), default=FIXED, help="clip windows (FM_VIDEO_CUTS)")
    args = parser.parse_args()
    policy = replace(ClipPolicy(), store_clip=args.store_clips, cuts=args.cuts)
    source, videos = load_videos(args.data, args.videos)
    validate, clips = bench_validate_clip(videos, args.repeats, policy)
    result = {
        "source": source,
        "pyav": av.__version__,
        "cpu": os.cpu_count(),
        "validate_clip_keyframes": validate,
        "near_dup_recall": bench_near_dup(videos, clips, policy),
        "loader_cpu": bench_loader(clips, args.repeats),
        "loader_gpu": bench_loader_gpu(clips, args.repeats),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
