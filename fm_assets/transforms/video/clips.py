"""Cut a video into fixed windows and extract each window's keyframes as one JPEG strip.

``ClipPolicy`` fixes the windows (``window_s`` long; a last remainder shorter than ``min_clip_s`` is
dropped), the number of keyframes per clip (evenly spaced: the frame shown at ``start + (i + 0.5) *
length / F``), their normalised size (short side ``short_side``, long side rounded to a multiple of 16 so
JPEG blocks never straddle two frames) and the JPEG quality. The F keyframes are stacked vertically into one
JPEG (``<key>.strip.jpg`` in the shard): one decode per sample for the loader. Decoding is sequential, once
per video; Pillow's resize and JPEG encoder are deterministic, so a re-run gives the same bytes.

When the policy asks (``store_clip``, off by default) each clip is also stored re-encoded on the CPU
(``encode_clip``): the frames shown at ``clip_fps`` evenly spaced times of the window, at the keyframes'
normalised size, as MPEG-4 Part 2 (FFmpeg's native ``mpeg4`` encoder, fixed quantiser, one thread, bitexact
codec and container flags) in MP4, so a re-run gives the same bytes; the PyAV version (which pins the bundled
FFmpeg) is in the policy config. libx264 was tried first and dropped: through PyAV it gave different bytes
on about one run in five even with one thread. No GPU encoder is assumed (NVDEC decodes MPEG-4 Part 2).

Frames are resized as soon as they are picked and each window's clip is finished before the next window is
decoded, so memory holds one window's normalised frames, not the video's.

Per clip it also measures what the clip rules judge: ``motion`` (mean absolute luma difference between
consecutive keyframes at 32x32, 0..1) and ``blank_fraction`` (share of keyframes that are near-uniform or
black), and the pHash of every keyframe (near-dup compares them all, aligned by position).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from fm_assets.transforms.image.phash import phash_many
from fm_assets.transforms.media_errors import MediaError, error_text
from fm_assets.transforms.video.probe import CORRUPT_VIDEO

STRIP_EXT = "strip.jpg"
SHOT_SIDE = 16  # shot boundaries compare frames downscaled to this many pixels a side
FIXED, SHOTS = "fixed", "shots"  # ClipPolicy.cuts
T = TypeVar("T")
CLIP_EXT = "clip.mp4"
CLIP_ENCODE_FAILED = "clip_encode_failed"


@dataclass(frozen=True)
class ClipPolicy:
    version: str = "video-clips-v2"  # v2: optional re-encoded clip
    window_s: float = 8.0
    min_clip_s: float = 2.0
    keyframes: int = 4
    short_side: int = 128
    jpeg_quality: int = 85
    blank_std: float = 4.0  # luma standard deviation (0..255) below which a keyframe is blank
    # the re-encoded clip, stored only when store_clip is set
    store_clip: bool = False
    clip_fps: int = 8
    clip_codec: str = "mpeg4"  # FFmpeg's own MPEG-4 Part 2 encoder: single-threaded, deterministic
    clip_qscale: int = 6  # fixed quantiser (1 best .. 31), no rate control state to drift
    # where clips are cut: "fixed" windows, or "shots" (a cut where consecutive sampled frames differ by more
    # than shot_threshold, mean |luma difference| 0..1 at SHOT_SIDE x SHOT_SIDE; each shot then in windows)
    cuts: str = FIXED
    shot_sample_fps: float = 4.0
    shot_threshold: float = 0.25

    def config(self) -> dict[str, Any]:
        import av  # PyAV (FFmpeg) only where video is handled: a text run never loads it
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

    def shot_windows(self, duration_s: float, cuts: list[float]) -> list[tuple[float, float]]:
        """The clip windows of a video cut at ``cuts`` (seconds): each shot in ``windows``; a shot shorter
        than ``min_clip_s`` joins the shot before it (the first one, the shot after it)."""
        bounds = [0.0, *sorted(c for c in cuts if 0.0 < c < duration_s), duration_s]
        shots: list[tuple[float, float]] = []
        for start, end in pairwise(bounds):
            if shots and (end - start < self.min_clip_s or shots[-1][1] - shots[-1][0] < self.min_clip_s):
                shots[-1] = (shots[-1][0], end)
            else:
                shots.append((start, end))
        return [
            (round(start + a, 6), round(start + b, 6))
            for start, end in shots
            for a, b in self.windows(end - start)
        ]

    def frame_size(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) of a normalised keyframe: short side ``short_side``, both multiples of 16."""
        short, long = sorted((width, height))
        scaled = max(16, round(long * self.short_side / max(short, 1) / 16) * 16)
        return (scaled, self.short_side) if width >= height else (self.short_side, scaled)

    def clip_times(self, start: float, end: float) -> list[float]:
        """The times of a stored clip's frames: ``clip_fps`` a second, each in the middle of its interval."""
        count = max(1, int((end - start) * self.clip_fps + 1e-9))
        return [start + (i + 0.5) / self.clip_fps for i in range(count)]


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
    clip: bytes | None = None  # the re-encoded clip (MP4), when the policy stores clips


def _keyframe_times(start: float, end: float, count: int) -> list[float]:
    return [start + (i + 0.5) * (end - start) / count for i in range(count)]


class _Resized:
    """Pick frames and resize each once (a frame shown at several times is resized once)."""

    def __init__(self, policy: ClipPolicy) -> None:
        self.policy = policy
        self.size: tuple[int, int] | None = None
        self._last: tuple[int, Image.Image] | None = None

    def __call__(self, serial: int, frame: np.ndarray) -> Image.Image:
        if self._last is not None and self._last[0] == serial:
            return self._last[1]
        if self.size is None:
            height, width = frame.shape[:2]
            self.size = self.policy.frame_size(width, height)
        image = Image.fromarray(frame).resize(self.size, Image.Resampling.BICUBIC)
        self._last = (serial, image)
        return image


def _luma(serial: int, frame: np.ndarray, side: int = SHOT_SIDE) -> np.ndarray:
    """A frame as ``side`` x ``side`` luma (box-averaged), for shot-boundary differences."""
    gray = Image.fromarray(frame).convert("L").resize((side, side), Image.Resampling.BOX)
    return np.asarray(gray, dtype=np.float64)


def _frames_at(data: bytes, times: list[float], resize: Callable[[int, np.ndarray], T]) -> Iterator[T]:
    """The frame shown at each time (sorted ``times``: the last frame starting at or before it), converted by
    ``resize(serial, rgb)`` (``serial`` tells a frame shown at several times), yielded in order as the decode
    reaches it."""
    import av
    from av.error import FFmpegError

    picked = 0
    previous: tuple[int, np.ndarray] | None = None
    serial = 0
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            stream = container.streams.video[0]
            base = stream.time_base
            for packet in container.demux(stream):
                if packet.size == 0 and packet.pts is not None:  # Theora's "repeat the last frame"
                    continue
                for frame in packet.decode():
                    at = float(frame.pts * base) if frame.pts is not None and base is not None else 0.0
                    while picked < len(times) and at > times[picked] and previous is not None:
                        picked += 1
                        yield resize(*previous)
                    serial += 1
                    previous = (serial, frame.to_ndarray(format="rgb24"))
                if picked == len(times):
                    break
    except FFmpegError as exc:
        raise MediaError(CORRUPT_VIDEO, {"error": error_text(exc), "keyframes_read": picked}) from exc
    if previous is None:
        raise MediaError(CORRUPT_VIDEO, {"error": "no frame decodes"})
    for _ in range(len(times) - picked):  # times past the last frame show the last frame
        yield resize(*previous)


def encode_clip(frames: list[Image.Image], policy: ClipPolicy) -> bytes:
    """The frames as one MP4 at ``clip_fps``: fixed codec and parameters, one thread, bitexact: same bytes
    on every run."""
    import av
    from av.error import FFmpegError

    width, height = frames[0].size
    out = io.BytesIO()
    try:
        with av.open(out, mode="w", format="mp4", options={"fflags": "+bitexact"}) as container:
            quantiser = str(policy.clip_qscale)  # qmin = qmax: every frame at this quantiser
            options = {"qmin": quantiser, "qmax": quantiser, "flags": "+bitexact", "threads": "1"}
            stream = container.add_stream(policy.clip_codec, rate=policy.clip_fps, options=options)
            assert isinstance(stream, av.VideoStream), policy.clip_codec
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.thread_count = 1
            for number, image in enumerate(frames):
                frame = av.VideoFrame.from_image(image)
                frame.pts = number
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
    except FFmpegError as exc:  # an encoder missing from this PyAV build, or refusing the frames
        raise MediaError(CLIP_ENCODE_FAILED, {"error": error_text(exc), "codec": policy.clip_codec}) from exc
    return out.getvalue()


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


def detect_cuts(data: bytes, duration_s: float, policy: ClipPolicy) -> list[float]:
    """Shot boundaries: frames sampled ``shot_sample_fps`` times a second, downscaled to luma; a cut halfway
    between two consecutive samples whose mean absolute difference (0..1) exceeds ``shot_threshold``."""
    step = 1.0 / policy.shot_sample_fps
    times = [(i + 0.5) * step for i in range(int(duration_s * policy.shot_sample_fps + 1e-9))]
    cuts = []
    previous: np.ndarray | None = None
    for i, luma in enumerate(_frames_at(data, times, _luma)):
        if previous is not None and float(np.abs(luma - previous).mean()) / 255.0 > policy.shot_threshold:
            cuts.append(round(i * step, 6))
        previous = luma
    return cuts


def clip_windows(data: bytes, duration_s: float, policy: ClipPolicy) -> list[tuple[float, float]]:
    """The video's clip windows under the policy: fixed windows, or windows of its shots."""
    if policy.cuts == SHOTS:
        return policy.shot_windows(duration_s, detect_cuts(data, duration_s, policy))
    return policy.windows(duration_s)


def extract_clips(data: bytes, duration_s: float, policy: ClipPolicy) -> list[Clip]:
    """Every clip of the video in ``data`` with its keyframe strip and measurements (empty if too short),
    and its re-encoded clip when the policy stores clips."""
    windows = clip_windows(data, duration_s, policy)
    if not windows:
        return []
    plan = []  # per window: (keyframe times, clip frame times)
    for start, end in windows:
        keyframe_times = _keyframe_times(start, end, policy.keyframes)
        plan.append((keyframe_times, policy.clip_times(start, end) if policy.store_clip else []))
    # the times in order, each tagged (window, is a clip frame); a keyframe and a clip frame at one time
    # both get the frame shown then
    tagged = sorted(
        (t, window, kind) for window, times in enumerate(plan) for kind in (0, 1) for t in times[kind]
    )
    resize = _Resized(policy)
    frames = _frames_at(data, [t for t, _, _ in tagged], resize)
    clips = []
    current: tuple[list[Image.Image], list[Image.Image]] = ([], [])
    window = 0
    for (_, of, kind), image in zip(tagged, frames, strict=True):
        while of > window:  # the earlier window is complete
            clips.append(_clip(window, windows[window], current, policy))
            current, window = ([], []), window + 1
        current[kind].append(image)
    clips.append(_clip(window, windows[window], current, policy))
    return clips


def _clip(
    index: int,
    window: tuple[float, float],
    frames: tuple[list[Image.Image], list[Image.Image]],
    policy: ClipPolicy,
) -> Clip:
    images, clip_frames = frames
    gray = [np.asarray(i.convert("L").resize((32, 32), Image.Resampling.BOX), np.float64) for i in images]
    blank = sum(1 for g in gray if g.std() < policy.blank_std) / len(gray)
    return Clip(
        index=index,
        start_s=window[0],
        end_s=window[1],
        strip=_encode_strip(images, policy.jpeg_quality),
        frame_width=images[0].size[0],
        frame_height=images[0].size[1],
        keyframes=len(images),
        phashes=tuple(int(h) for h in phash_many(images)),
        motion=_motion(gray),
        blank_fraction=round(blank, 6),
        clip=encode_clip(clip_frames, policy) if clip_frames else None,
    )
