"""Video probe, clip windows, keyframe strips and the video rules, on videos PyAV encodes for each test."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image
from video_fixtures import audio_only, black_video, clip_video, encode_video, moving_frames

from fm_assets.transforms.media_errors import UNSUPPORTED_CODEC, MediaError
from fm_assets.transforms.video.clips import ClipPolicy, extract_clips
from fm_assets.transforms.video.probe import (
    CORRUPT_VIDEO,
    NO_VIDEO_STREAM,
    RESOLUTION_TOO_LARGE,
    TRUNCATED_VIDEO,
    VIDEO_TOO_LONG,
    VideoLimits,
    probe_video,
)
from fm_assets.transforms.video.rules import (
    BLANK_FRAMES,
    RESOLUTION_TOO_SMALL,
    STATIC_CLIP,
    VideoRules,
    judge_clip,
    judge_video,
)

LIMITS = VideoLimits()


@pytest.mark.parametrize(
    ("container", "codec", "name"),
    [
        ("mp4", "mpeg4", "mpeg4"),
        ("webm", "libvpx", "vp8"),
        ("matroska", "mpeg4", "mpeg4"),
        ("mov", "libx264", "h264"),
    ],
)
def test_probe_measures_every_container(container: str, codec: str, name: str) -> None:
    info = probe_video(clip_video(3.0, width=80, height=48, fps=10, container=container, codec=codec), LIMITS)
    assert (info.codec, info.width, info.height, info.frames) == (name, 80, 48, 30)
    assert info.duration_s == pytest.approx(3.0, abs=0.11)
    assert info.fps == pytest.approx(10.0)
    assert info.has_audio is False


def test_probe_sees_the_audio_track() -> None:
    assert probe_video(encode_video(moving_frames(64, 48, 20), audio=True), LIMITS).has_audio is True


def _reason(data: bytes, limits: VideoLimits = LIMITS) -> tuple[str, dict]:
    with pytest.raises(MediaError) as caught:
        probe_video(data, limits)
    return caught.value.reason, dict(caught.value.details)


def test_rejects_name_the_measured_value() -> None:
    mp4 = clip_video(5.0)
    webm = clip_video(5.0, container="webm", codec="libvpx")
    assert _reason(mp4[: len(mp4) // 2])[0] == TRUNCATED_VIDEO  # the mp4 index was never written
    reason, details = _reason(webm[: len(webm) * 6 // 10])
    assert reason == TRUNCATED_VIDEO and details["declared_duration_s"] == 5.0 and 0 < details["value"] < 4.5
    assert _reason(b"not a video at all" * 40)[0] == CORRUPT_VIDEO
    assert _reason(mp4[:40] + b"\0" * 50 + mp4[90:])[0] == CORRUPT_VIDEO
    assert _reason(audio_only()) == (NO_VIDEO_STREAM, {"streams": ["audio"], "bytes": len(audio_only())})
    reason, details = _reason(clip_video(3.0), VideoLimits(max_duration_s=2.0))
    assert reason == VIDEO_TOO_LONG and details["value"] == pytest.approx(3.0) and details["threshold"] == 2.0
    reason, details = _reason(clip_video(3.0), VideoLimits(codecs=("h264",)))
    assert (reason, details["value"]) == (UNSUPPORTED_CODEC, "mpeg4")


def test_resolution_is_refused_from_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    import fm_assets.transforms.video.probe as probe

    def no_decode(data: bytes) -> None:
        raise AssertionError("decoded a frame of a video the header already refuses")

    monkeypatch.setattr(probe, "_decode_first_frame", no_decode)
    reason, details = _reason(clip_video(2.0, width=320, height=240), VideoLimits(max_pixels=320 * 200))
    assert reason == RESOLUTION_TOO_LARGE and details["value"] == [320, 240]


def test_clips_are_fixed_windows_with_evenly_spaced_keyframes() -> None:
    policy = ClipPolicy(window_s=2.0, min_clip_s=1.5, keyframes=4, short_side=64)
    assert policy.windows(5.0) == [(0.0, 2.0), (2.0, 4.0)]  # the 1 s remainder is too short
    assert policy.windows(5.6) == [(0.0, 2.0), (2.0, 4.0), (4.0, 5.6)]
    clips = extract_clips(clip_video(5.0, width=96, height=48), 5.0, policy)
    assert [(c.start_s, c.end_s) for c in clips] == [(0.0, 2.0), (2.0, 4.0)]
    strip = Image.open(io.BytesIO(clips[0].strip))
    assert strip.format == "JPEG" and strip.size == (128, 64 * 4)
    assert (clips[0].frame_width, clips[0].frame_height, clips[0].keyframes) == (128, 64, 4)
    assert len(set(clips[0].phashes)) > 1 and clips[0].motion > 0.01
    again = extract_clips(clip_video(5.0, width=96, height=48), 5.0, policy)
    assert [c.strip for c in again] == [c.strip for c in clips]  # same bytes on a re-run


def test_static_and_black_clips_are_measured_and_judged() -> None:
    rules = VideoRules()
    static = extract_clips(clip_video(3.0, static=True), 3.0, ClipPolicy())[0]
    black = extract_clips(black_video(3.0), 3.0, ClipPolicy())[0]
    moving = extract_clips(clip_video(3.0), 3.0, ClipPolicy())[0]
    verdict = judge_clip(static.motion, static.blank_fraction, rules)
    assert (verdict.reason, verdict.details["threshold"]) == (STATIC_CLIP, rules.min_motion)
    assert judge_clip(black.motion, black.blank_fraction, rules).reason == BLANK_FRAMES
    assert judge_clip(moving.motion, moving.blank_fraction, rules).keep
    small = judge_video(3.0, 40, 24, rules)
    assert (small.reason, small.details["value"]) == (RESOLUTION_TOO_SMALL, [40, 24])


def test_a_stored_clip_is_the_window_re_encoded_with_the_same_bytes_on_every_run() -> None:
    import av

    video = clip_video(5.0, width=96, height=48, fps=10, seed=3)
    plain = ClipPolicy(window_s=2.0, min_clip_s=1.5, keyframes=4, short_side=64)
    stored = ClipPolicy(
        window_s=2.0, min_clip_s=1.5, keyframes=4, short_side=64, store_clip=True, clip_fps=10
    )
    assert all(c.clip is None for c in extract_clips(video, 5.0, plain))  # off by default
    clips = extract_clips(video, 5.0, stored)
    assert [c.strip for c in clips] == [c.strip for c in extract_clips(video, 5.0, plain)]  # strips unchanged
    runs = [[c.clip for c in extract_clips(video, 5.0, stored)] for _ in range(4)]
    assert all(run == [c.clip for c in clips] for run in runs)  # byte-identical re-runs
    assert clips[0].clip != clips[1].clip
    with av.open(io.BytesIO(clips[1].clip or b"")) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        assert (stream.codec_context.name, float(stream.average_rate or 0)) == ("mpeg4", 10.0)
    assert len(frames) == 20 and frames[0].shape == (64, 128, 3)  # 2 s at 10 fps, the keyframes' size
    # its frames are the window's: the strip's first keyframe (t = 2.25 s) is the clip's third frame (2.25 s)
    first_key = np.asarray(Image.open(io.BytesIO(clips[1].strip)).convert("RGB"))[:64].astype(int)
    errors = [np.abs(f.astype(int) - first_key).mean() for f in frames]
    assert int(np.argmin(errors)) == 2 and errors[2] < 0.6 * min(errors[:2] + errors[3:])
    # the quantiser is applied (a finer one: more bytes)
    fine = extract_clips(video, 5.0, replace(stored, clip_qscale=2))[1].clip or b""
    coarse = extract_clips(video, 5.0, replace(stored, clip_qscale=20))[1].clip or b""
    assert len(fine) > 1.5 * len(clips[1].clip or b"") > 1.5 * 1.2 * len(coarse)


def three_shots(trim_frames: int = 0) -> bytes:
    """5 s dark, 6 s bright, 4 s inverted: each shot a moving pattern of its own (5 fps); without its first
    ``trim_frames`` frames when asked."""
    dark = [(f // 3).astype(np.uint8) for f in moving_frames(96, 64, 25, seed=1)]
    bright = [(128 + f // 2).astype(np.uint8) for f in moving_frames(96, 64, 30, seed=2)]
    inverted = [255 - f for f in moving_frames(96, 64, 20, seed=3)]
    return encode_video((dark + bright + inverted)[trim_frames:], fps=5)


def test_a_start_trimmed_copy_pairs_only_where_shot_cuts_realign_its_windows() -> None:
    """The documented limit of video near-dup: windows must line up. 3 s cut off the start shifts every fixed
    window, so no clip of the copy pairs with the original's; shot cuts re-anchor the windows at the cuts,
    so the copy's clips after its first cut pair with the original's clips of the same shots."""
    from fm_assets.transforms.dedup.image_near_dup import ImageNearDupConfig, is_near, position_distances
    from fm_assets.transforms.video.clips import SHOTS

    limit = ImageNearDupConfig().max_distance
    original, copy = three_shots(), three_shots(trim_frames=15)

    def pairs(policy: ClipPolicy) -> list[tuple[float, float]]:
        a, b = extract_clips(original, 15.0, policy), extract_clips(copy, 12.0, policy)
        return [
            (x.start_s, y.start_s)
            for x in a
            for y in b
            if is_near(position_distances(list(x.phashes), list(y.phashes)), limit)
        ]

    assert pairs(ClipPolicy()) == []  # fixed windows: 0-8 / 8-15 against the copy's 0-8 (3-11) / 8-12 (11-15)
    assert pairs(ClipPolicy(cuts=SHOTS)) == [
        (5.0, 2.0),
        (11.0, 8.0),
    ]  # the same shots, 3 s earlier in the copy


def test_shot_cuts_follow_the_shots_and_each_shot_is_cut_into_windows() -> None:
    from fm_assets.transforms.video.clips import SHOTS, detect_cuts

    video = three_shots()
    shots = ClipPolicy(cuts=SHOTS)
    assert detect_cuts(video, 15.0, shots) == [5.0, 11.0]  # motion inside a shot is no cut
    clips = extract_clips(video, 15.0, shots)
    assert [(c.start_s, c.end_s) for c in clips] == [(0.0, 5.0), (5.0, 11.0), (11.0, 15.0)]
    assert [(c.start_s, c.end_s) for c in extract_clips(video, 15.0, ClipPolicy())] == [
        (0.0, 8.0),
        (8.0, 15.0),
    ]
    levels = [np.asarray(Image.open(io.BytesIO(c.strip)).convert("L")).mean() for c in clips]
    assert levels[0] < 60 < levels[1] and levels[2] > 90  # every keyframe of a clip is from its own shot
    assert extract_clips(video, 15.0, shots) == clips  # deterministic


def test_shot_windows_merge_short_shots_and_split_long_ones() -> None:
    policy = ClipPolicy(window_s=4.0, min_clip_s=2.0)
    assert policy.shot_windows(10.0, [1.0, 6.5]) == [(0.0, 4.0), (4.0, 6.5), (6.5, 10.0)]  # 0-1 s joins 1-6.5
    # 3-4 s joins 0-3; the last 1.5 s is too short for a clip of its own
    assert policy.shot_windows(9.5, [3.0, 4.0]) == [(0.0, 4.0), (4.0, 8.0)]
    assert policy.shot_windows(10.0, []) == policy.windows(10.0)
    assert policy.shot_windows(1.5, [0.5]) == []  # too short for any clip, however it is cut
