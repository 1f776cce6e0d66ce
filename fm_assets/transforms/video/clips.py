"""Cut a video into fixed windows and extract each window's keyframes as one JPEG strip.

``ClipPolicy`` fixes the windows (``window_s`` long; a last remainder shorter than ``min_clip_s`` is
dropped), the number of keyframes per clip (evenly spaced: the frame shown at ``start + (i + 0.5) *
length / F``), their normalised size (short side ``short_side``, long side rounded to a multiple of 16 so
JPEG blocks never straddle two frames) and the JPEG quality. The F keyframes are stacked vertically into one
JPEG (``<key>.strip.jpg`` in the shard): one decode per sample for the loader. Decoding is sequential, once
per video; Pillow's resize and JPEG encoder are deterministic, so a re-run gives the same bytes.

Per clip it also measures what the clip rules judge: ``motion`` (mean absolute luma difference between
consecutive keyframes at 32x32, 0..1) and ``blank_fraction`` (share of keyframes that are near-uniform or
black), and the pHash of every keyframe (near-dup compares them all, aligned by position).
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

import av
import numpy as np
from av.error import FFmpegError
from PIL import Image

from fm_assets.transforms.image.phash import phash_many
from fm_assets.transforms.media_errors import MediaError, error_text
from fm_assets.transforms.video.probe import CORRUPT_VIDEO

STRIP_EXT = "strip.jpg"


@dataclass(frozen=True)
class ClipPolicy:
    version: str = "video-clips-v1"
    window_s: float = 8.0
    min_clip_s: float = 2.0
    keyframes: int = 4
    short_side: int = 128
    jpeg_quality: int = 85
    blank_std: float = 4.0  # luma standard deviation (0..255) below which a keyframe is blank

    def config(self) -> dict[str, Any]:
        import PIL

        return {**asdict(self), "pillow": PIL.__version__, "pyav": av.__version__}

    def windows(self, duration_s: float) -> list[tuple[float, float]]:
        """The clip windows of a video of ``duration_s`` seconds, in order."""
        out = []
        start = 0.0
        while duration_s - start >= self.min_clip_s - 1e-9:
            end = min(start + self.window_s, duration_s)
            out.append((round(start, 6), round(end, 6)))
            start = end
        return out

    def frame_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) of a normalised keyframe: short side ``short_side``, both multiples of 16."""
        short, long = sorted((width, height))
        scaled = max(16, round(long * self.short_side / max(short, 1) / 16) * 16)
        return (scaled, self.short_side) if width >= height else (self.short_side, scaled)


@dataclass(frozen=True)
class Clip:
    index: int
    start_s: float
    end_s: float
    strip: bytes  # F keyframes stacked vertically, one JPEG
    frame_width: int
    frame_height: int
    keyframes: int
    phashes: tuple[int, ...]
    motion: float
    blank_fraction: float


def _targets(windows: list[tuple[float, float]], count: int) -> list[float]:
    return [start + (i + 0.5) * (end - start) / count for start, end in windows for i in range(count)]


def _frames_at(data: bytes, times: list[float]) -> list[np.ndarray]:
    """The RGB frame shown at each time (sorted ``times``): the last frame starting at or before it."""
    picked: list[np.ndarray] = []
    previous: np.ndarray | None = None
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            stream = container.streams.video[0]
            base = stream.time_base
            for packet in container.demux(stream):
                if packet.size == 0 and packet.pts is not None:  # Theora's "repeat the last frame"
                    continue
                for frame in packet.decode():
                    at = float(frame.pts * base) if frame.pts is not None and base is not None else 0.0
                    while len(picked) < len(times) and at > times[len(picked)] and previous is not None:
                        picked.append(previous)
                    previous = frame.to_ndarray(format="rgb24")
                if len(picked) == len(times):
                    break
    except FFmpegError as exc:
        raise MediaError(CORRUPT_VIDEO, {"error": error_text(exc), "keyframes_read": len(picked)}) from exc
    if previous is None:
        raise MediaError(CORRUPT_VIDEO, {"error": "no frame decodes"})
    picked += [previous] * (len(times) - len(picked))  # times past the last frame show the last frame
    return picked


def _encode_strip(frames: list[Image.Image], quality: int) -> bytes:
    width, height = frames[0].size
    strip = Image.new("RGB", (width, height * len(frames)))
    for i, frame in enumerate(frames):
        strip.paste(frame, (0, i * height))
    out = io.BytesIO()
    strip.save(out, format="JPEG", quality=quality, optimize=False, progressive=False, subsampling=2)
    return out.getvalue()


def _motion(gray: list[np.ndarray]) -> float:
    if len(gray) < 2:
        return 0.0
    diffs = [float(np.abs(a - b).mean()) for a, b in pairwise(gray)]
    return round(sum(diffs) / len(diffs) / 255.0, 6)


def extract_clips(data: bytes, duration_s: float, policy: ClipPolicy) -> list[Clip]:
    """Every clip of the video in ``data`` with its keyframe strip and measurements (empty if too short)."""
    windows = policy.windows(duration_s)
    if not windows:
        return []
    raw = _frames_at(data, _targets(windows, policy.keyframes))
    height, width = raw[0].shape[:2]
    size = policy.frame_size(width, height)
    clips = []
    for index, (start, end) in enumerate(windows):
        chunk = raw[index * policy.keyframes : (index + 1) * policy.keyframes]
        images = [Image.fromarray(a).resize(size, Image.Resampling.BICUBIC) for a in chunk]
        gray = [np.asarray(i.convert("L").resize((32, 32), Image.Resampling.BOX), np.float64) for i in images]
        blank = sum(1 for g in gray if g.std() < policy.blank_std) / len(gray)
        clips.append(
            Clip(
                index=index,
                start_s=start,
                end_s=end,
                strip=_encode_strip(images, policy.jpeg_quality),
                frame_width=size[0],
                frame_height=size[1],
                keyframes=len(images),
                phashes=tuple(int(h) for h in phash_many(images)),
                motion=_motion(gray),
                blank_fraction=round(blank, 6),
            )
        )
    return clips
