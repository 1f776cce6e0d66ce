"""One image-text or audio-text sample of the media sample corpus, and writing samples as a landing-ready folder.

Layout: ``<dest>/<modality>/<package>/<key>.<ext>`` with ``<key>.txt`` (the caption or transcript) and
``<key>.json`` (the text again, SPDX licence, source package, original path, language) beside it, the
"files grouped by key" form that ``fm land`` accepts. Keys never contain dots (a WebDataset key ends
at the first dot of a file name).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IMAGE = "image"
AUDIO = "audio"
VIDEO = "video"


@dataclass(frozen=True)
class MediaSample:
    key: str  # relative path without extension, "/"-separated, no dots
    ext: str  # "png", "jpg", "wav", ...
    media: bytes
    text: str
    meta: dict[str, Any] = field(default_factory=dict)  # licence, source package, original path, language


def sample_key(*parts: str) -> str:
    """A key from path parts: dots and spaces become underscores, empty parts are dropped."""
    return "/".join(part.replace(".", "_").replace(" ", "_") for part in parts if part)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_media_samples(samples: Iterable[MediaSample], out_dir: Path, text_field: str) -> dict[str, Any]:
    """Replace ``out_dir`` with one media + .txt + .json triple per sample; return counts and bytes.

    ``text_field`` names the text in the .json ("caption" for images, "transcript" for audio).
    """
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    count = media_bytes = 0
    seen: set[str] = set()
    for sample in samples:
        if sample.key in seen:
            raise ValueError(f"duplicate sample key {sample.key!r} in {out_dir}")
        seen.add(sample.key)
        stem = out_dir / sample.key
        stem.parent.mkdir(parents=True, exist_ok=True)
        sidecar = {text_field: sample.text, **sample.meta}
        _write_atomic(stem.with_name(f"{stem.name}.{sample.ext}"), sample.media)
        _write_atomic(stem.with_name(f"{stem.name}.txt"), sample.text.encode("utf-8"))
        _write_atomic(
            stem.with_name(f"{stem.name}.json"),
            json.dumps(sidecar, ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8"),
        )
        count += 1
        media_bytes += len(sample.media)
    return {"samples": count, "media_bytes": media_bytes}
