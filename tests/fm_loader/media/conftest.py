"""Session fixtures: small image-text and audio-text datasets built with :mod:`media_shards`."""

from __future__ import annotations

from pathlib import Path

import pytest
from media_shards import audio_samples, image_samples, video_samples, write_dataset


@pytest.fixture(scope="session")
def image_dataset(tmp_path_factory) -> Path:
    """Four image-text shards of uneven sizes (130 samples, 9 aspect ratios), with caption tokens."""
    folder = tmp_path_factory.mktemp("media") / "images"
    write_dataset(folder, "image-text", image_samples, [40, 25, 35, 30])
    return folder / "manifest.json"


@pytest.fixture(scope="session")
def audio_dataset(tmp_path_factory) -> Path:
    """Three audio-text shards (WAV and FLAC, 16 kHz mono, 800 to 2170 frames)."""
    folder = tmp_path_factory.mktemp("media") / "audio"
    write_dataset(folder, "audio-text", audio_samples, [20, 17, 23])
    return folder / "manifest.json"


@pytest.fixture(scope="session")
def video_dataset(tmp_path_factory) -> Path:
    """Three video-text shards (61 clips of 3 or 4 keyframes at 3 aspect ratios), with caption tokens."""
    folder = tmp_path_factory.mktemp("media") / "videos"
    write_dataset(folder, "video-text", video_samples, [25, 17, 19])
    return folder / "manifest.json"
