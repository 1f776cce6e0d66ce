"""Probe a video with PyAV (FFmpeg's libraries) without decoding the whole file.

``probe_video`` reads the container header (codec, resolution, frame rate, declared duration, audio
track), refuses what the limits forbid before any frame is decoded (``resolution_too_large``,
``video_too_long``, ``unsupported_codec``, ``zero_duration``), then walks the packets without decoding them
(frame count, where the stream really ends: a file cut short is ``truncated_video``) and decodes only the
first frame (``corrupt_video`` when it does not decode). Every failure is a ``MediaError`` with the measured
value and the limit.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from typing import Any

from fm_assets.transforms.media_errors import UNSUPPORTED_CODEC, MediaError, error_text

TRUNCATED_VIDEO = "truncated_video"
NO_VIDEO_STREAM = "no_video_stream"
ZERO_DURATION = "zero_duration"
VIDEO_TOO_LONG = "video_too_long"
RESOLUTION_TOO_LARGE = "resolution_too_large"
CORRUPT_VIDEO = "corrupt_video"

# container signatures: a file that starts like a video container but does not open was cut short (an mp4
# whose index was never written, a Matroska/Ogg file cut inside its header); anything else is corrupt
_SIGNATURES = ((4, b"ftyp"), (0, b"\x1a\x45\xdf\xa3"), (0, b"OggS"), (4, b"moov"), (4, b"mdat"))


@dataclass(frozen=True)
class VideoLimits:
    """What ``media_validate`` accepts; its ``config()`` is part of the stage key."""

    version: str = "video-limits-v1"
    codecs: tuple[str, ...] = ("av1", "h264", "hevc", "mpeg4", "mpeg2video", "theora", "vp8", "vp9")
    max_duration_s: float = 600.0
    max_pixels: int = 3840 * 2160
    # packets must reach this share of the declared duration (screen recordings hold their last frame)
    min_packet_coverage: float = 0.75

    def config(self) -> dict[str, Any]:
        import av  # PyAV (FFmpeg) only where video is handled: a text run never loads it

        return {**asdict(self), "codecs": list(self.codecs), "pyav": av.__version__}


@dataclass(frozen=True)
class VideoInfo:
    codec: str
    container: str
    width: int
    height: int
    fps: float
    duration_s: float
    frames: int  # video packets with a time: displayed frames, repeats included
    has_audio: bool

    @property
    def media_format(self) -> str:
        return f"{self.container}/{self.codec}"


def _open(data: bytes) -> Any:
    import av
    from av.error import FFmpegError

    try:
        return av.open(io.BytesIO(data), mode="r")
    except FFmpegError as exc:
        known = any(data[at : at + len(magic)] == magic for at, magic in _SIGNATURES)
        reason = TRUNCATED_VIDEO if known else CORRUPT_VIDEO
        raise MediaError(reason, {"error": error_text(exc), "bytes": len(data)}) from exc


def _declared_duration(container: Any, stream: Any) -> float:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000
    return 0.0


def probe_video(data: bytes, limits: VideoLimits) -> VideoInfo:
    """Measure the video in ``data``; raise ``MediaError`` for what cannot be used (see module doc)."""
    with _open(data) as container:
        if not container.streams.video:
            raise MediaError(
                NO_VIDEO_STREAM, {"streams": [s.type for s in container.streams], "bytes": len(data)}
            )
        stream = container.streams.video[0]
        codec = stream.codec_context.name
        width, height = int(stream.codec_context.width), int(stream.codec_context.height)
        if width * height > limits.max_pixels:
            raise MediaError(
                RESOLUTION_TOO_LARGE,
                {"value": [width, height], "pixels": width * height, "threshold": limits.max_pixels},
            )
        if codec not in limits.codecs:
            raise MediaError(UNSUPPORTED_CODEC, {"value": codec, "supported": list(limits.codecs)})
        duration = _declared_duration(container, stream)
        if duration > limits.max_duration_s:
            raise MediaError(
                VIDEO_TOO_LONG, {"value": round(duration, 3), "threshold": limits.max_duration_s}
            )
        fps = float(stream.average_rate or stream.guessed_rate or 0)
        frames, end = _walk_packets(container, stream)
        if duration <= 0:
            duration = end
        if duration <= 0:
            raise MediaError(ZERO_DURATION, {"value": round(duration, 3), "frames": frames})
        if frames == 0 or end < limits.min_packet_coverage * duration:
            raise MediaError(
                TRUNCATED_VIDEO,
                {"value": round(end, 3), "declared_duration_s": round(duration, 3), "frames": frames},
            )
        _decode_first_frame(data)
        return VideoInfo(
            codec=codec,
            container=container.format.name.split(",")[0],
            width=width,
            height=height,
            fps=round(fps, 6),
            duration_s=round(duration, 6),
            frames=frames,
            has_audio=bool(container.streams.audio),
        )


def _walk_packets(container: Any, stream: Any) -> tuple[int, float]:
    """(video packets, end time in seconds of the last one), demuxed without decoding."""
    from av.error import FFmpegError

    frames, end = 0, 0.0
    try:
        for packet in container.demux(stream):
            if packet.pts is None:  # the flush packet; an empty one with a time repeats a frame (Theora)
                continue
            frames += 1
            stop = packet.pts + (packet.duration or 0)
            end = max(end, float(stop * packet.time_base))
    except FFmpegError as exc:
        raise MediaError(
            TRUNCATED_VIDEO, {"error": error_text(exc), "frames_read": frames, "value": round(end, 3)}
        ) from exc
    return frames, end


def _decode_first_frame(data: bytes) -> None:
    import av
    from av.error import FFmpegError

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            for _frame in container.decode(video=0):
                return
    except FFmpegError as exc:
        raise MediaError(CORRUPT_VIDEO, {"error": error_text(exc)}) from exc
    raise MediaError(CORRUPT_VIDEO, {"error": "no frame decodes"})
