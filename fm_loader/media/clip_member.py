"""The optional fourth member of a video-text sample, ``<key>.clip.mp4``: the clip itself, re-encoded.

It comes last, inside the sample's byte range and checksum; the sample index does not locate it (its record
layout is unchanged), so a reader finds it from the tar header that follows the ``.json`` member.
"""

from __future__ import annotations

import tarfile

from fm_loader.tarwriter import BLOCK as TAR_BLOCK

CLIP_EXT = "clip.mp4"


def trailing_clip(tail: memoryview, meta_size: int) -> memoryview | None:
    """The ``<key>.clip.mp4`` payload of a sample, or None when the sample has three members.

    Args:
        tail: The sample's verified bytes from the start of its ``.json`` payload to the sample's end.
        meta_size: The ``.json`` payload's size.

    Raises:
        ValueError: Bytes follow the ``.json`` member but are not a whole clip member.
    """
    start = meta_size + (-meta_size) % TAR_BLOCK
    if start + TAR_BLOCK > len(tail):
        return None
    try:
        info = tarfile.TarInfo.frombuf(bytes(tail[start : start + TAR_BLOCK]), "utf-8", "strict")
    except tarfile.TarError as exc:
        raise ValueError(f"the member after the sample's .json has no valid tar header ({exc})") from exc
    payload = start + TAR_BLOCK
    if not info.name.endswith(f".{CLIP_EXT}") or payload + info.size > len(tail):
        raise ValueError(f"the member after the sample's .json is {info.name!r}, not a whole .{CLIP_EXT}")
    return tail[payload : payload + info.size]
