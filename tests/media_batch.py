"""A small generated media delivery with every shape of input and every kind of bad media, for tests.

``write_media_batch`` writes files grouped by key, a WebDataset tar and a media JSONL; ``EXPECTED`` says what
each stage must do with them.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from media_fixtures import (
    blank_png,
    bomb_png,
    jpeg_image,
    near_duplicate,
    not_an_image,
    png_image,
    silence_wav,
    stereo_wav,
    telephone_wav,
    tone_wav,
    truncated_jpeg,
    unsupported_codec_wav,
    zero_length_wav,
)

CAPTIONS = {
    "harbour": "A harbour at dusk with boats moored along the quay.",
    "tower": "A tall stone tower against a clear sky.",
    "tiles": "Square tiles in a repeating pattern of colours.",
    "panorama": "A wide panorama of hills and a river valley.",
}


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_media_batch(folder: Path) -> Path:
    """The first delivery: 4 good images (+ a near duplicate, an exact duplicate), broken images, WAVs."""
    images = folder / "images"
    audio = folder / "audio"
    images.mkdir(parents=True)
    audio.mkdir(parents=True)
    harbour = jpeg_image(640, 480, seed=1)
    good = {
        "harbour.jpg": harbour,
        "tower.jpg": jpeg_image(300, 600, seed=2),
        "tiles.png": png_image(256, 256, seed=3),
        "panorama.png": png_image(900, 300, seed=4),
    }
    for name, data in good.items():
        (images / name).write_bytes(data)
        (images / name).with_suffix(".txt").write_text(CAPTIONS[name.split(".")[0]] + "\n")
    (images / "tower.txt").unlink()  # this one's caption comes as JSON
    (images / "tower.json").write_text(json.dumps({"caption": CAPTIONS["tower"], "width_hint": 300}))
    (images / "harbour_small.jpg").write_bytes(near_duplicate(harbour, scale=0.8, quality=70))
    (images / "harbour_small.txt").write_text("The same harbour, smaller.\n")
    (images / "tiles_copy.png").write_bytes(good["tiles.png"])  # exact duplicate, other caption
    (images / "tiles_copy.txt").write_text("Tiles again, under another name.\n")
    broken = {
        "cut.jpg": truncated_jpeg(),
        "page.jpg": not_an_image(),
        "bomb.png": bomb_png(),
        "blank.png": blank_png(),
    }
    for name, data in broken.items():
        (images / name).write_bytes(data)
        (images / name).with_suffix(".txt").write_text(f"Caption of {name}.\n")
    (images / "orphan.jpg").write_bytes(jpeg_image(320, 240, seed=9))  # no caption
    sounds = {
        "hello.wav": (tone_wav(2.0, 16000, seed=0), "hello and welcome"),
        "stereo.wav": (stereo_wav(1.5, 44100, seed=1), "please hold the line"),
        "phone.wav": (telephone_wav(1.2, seed=2), "your call is important"),
        "empty.wav": (zero_length_wav(), "nothing at all"),
        "quiet.wav": (silence_wav(2.0), "a silent prompt"),
        "codec.wav": (unsupported_codec_wav(), "an odd encoding"),
    }
    for name, (data, transcript) in sounds.items():
        (audio / name).write_bytes(data)
        (audio / name).with_suffix(".txt").write_text(transcript + "\n")
    (folder / "pairs.tar").write_bytes(
        _tar(
            [
                ("0001.jpg", jpeg_image(480, 360, seed=11)),
                ("0001.txt", b"A tar image of a garden path."),
                ("0002.wav", tone_wav(1.0, 16000, seed=12)),
                ("0002.json", json.dumps({"transcript": "goodbye"}).encode()),
                ("0003.txt", b"text without its media"),
            ]
        )
    )
    listed = folder / "listed"
    listed.mkdir()
    (listed / "a.png").write_bytes(png_image(400, 300, seed=21))
    (listed / "captions.media.jsonl").write_text(
        json.dumps({"image": "a.png", "caption": "A listed image of a meadow."})
        + "\n"
        + json.dumps({"image": "missing.png", "caption": "Not delivered."})
        + "\n"
    )
    return folder


def write_second_batch(folder: Path) -> Path:
    """The second delivery: a near duplicate of the first batch's harbour and one new image."""
    folder.mkdir(parents=True)
    (folder / "harbour_again.jpg").write_bytes(
        near_duplicate(jpeg_image(640, 480, seed=1), scale=0.9, quality=80)
    )
    (folder / "harbour_again.txt").write_text("The harbour, delivered again.\n")
    (folder / "field.jpg").write_bytes(jpeg_image(500, 400, seed=31))
    (folder / "field.txt").write_text("An open field under clouds.\n")
    return folder


# what each stage rejects from write_media_batch, by reason
EXPECTED_REJECTS = {
    "media_land": {"missing_caption": 1, "missing_media": 2},
    "media_validate": {
        "truncated_image": 1,
        "not_an_image": 1,
        "decompression_bomb": 1,
        "zero_length_audio": 1,
        "unsupported_codec": 1,
    },
    "media_dedup": {"exact_duplicate": 1},
    "media_near_dedup": {"near_duplicate": 1},
}
