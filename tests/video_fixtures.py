"""Small generated videos for tests: PyAV encodes a moving pattern in a few milliseconds."""

from __future__ import annotations

import io

import av
import numpy as np


def moving_frames(
    width: int, height: int, frames: int, seed: int = 0, static: bool = False
) -> list[np.ndarray]:
    """Frames of a textured pattern that scrolls (or stands still): structure for pHash, motion for rules."""
    rng = np.random.default_rng(seed)
    tile = rng.integers(0, 256, size=(height // 8 + 2, (width + 3 * frames) // 8 + 2, 3), dtype=np.uint8)
    texture = np.kron(tile, np.ones((8, 8, 1), dtype=np.uint8))
    out = []
    for i in range(frames):  # scrolls 3 px a frame, never repeating: every clip of a video looks different
        shift = 0 if static else i * 3
        out.append(np.ascontiguousarray(texture[:height, shift : shift + width]))
    return out


def encode_video(
    frames: list[np.ndarray],
    fps: int = 10,
    container: str = "mp4",
    codec: str = "mpeg4",
    audio: bool = False,
) -> bytes:
    """The frames (H, W, 3 uint8) encoded as one video file, optionally with a silent audio track."""
    height, width = frames[0].shape[:2]
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=container) as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        sound = out.add_stream("aac", rate=8000) if audio else None
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
        if sound is not None:
            samples = np.zeros((1, 1024 * 4), dtype=np.float32)
            aframe = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
            aframe.sample_rate = 8000
            for packet in sound.encode(aframe):
                out.mux(packet)
            for packet in sound.encode():
                out.mux(packet)
    return buffer.getvalue()


def clip_video(
    seconds: float = 3.0,
    width: int = 64,
    height: int = 48,
    fps: int = 10,
    seed: int = 0,
    container: str = "mp4",
    codec: str = "mpeg4",
    static: bool = False,
) -> bytes:
    return encode_video(
        moving_frames(width, height, round(seconds * fps), seed, static), fps, container, codec
    )


def black_video(seconds: float = 3.0, width: int = 64, height: int = 48, fps: int = 10) -> bytes:
    return encode_video([np.zeros((height, width, 3), np.uint8)] * round(seconds * fps), fps)


def audio_only() -> bytes:
    """An mp4 with an audio track and no video stream."""
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as out:
        sound = out.add_stream("aac", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 8000), np.float32), format="fltp", layout="mono")
        frame.sample_rate = 8000
        for packet in [*sound.encode(frame), *sound.encode()]:
            out.mux(packet)
    return buffer.getvalue()
