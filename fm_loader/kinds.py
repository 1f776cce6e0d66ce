"""The one registry of sample kinds: each kind's manifest type, shard codec and batch builder.

A manifest names its kind (``packed-tokens`` manifests predate the field and are recognised by its absence;
media manifests say ``"kind": "fm_loader.media-manifest"`` and their modality). :func:`read_manifest` reads
any of them, and :class:`fm_loader.loader.Loader` builds batches with the kind's builder. A new modality is
one more entry here plus its codec and builder, not a copy of the loader.

Only the names of the builders live here (they import torch); the manifests and codecs are torch-free, so the
pipeline reads and writes releases through this module without paying for torch.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fm_loader.format import decode_index, encode_shard
from fm_loader.manifest import DatasetManifest
from fm_loader.manifest_base import Manifest
from fm_loader.media.format import decode_media_index, encode_media_shard
from fm_loader.media.manifest import MANIFEST_KIND as MEDIA_MANIFEST_KIND
from fm_loader.media.manifest import MediaManifest
from fm_loader.storage import is_remote, local_path, read_bytes

PACKED_TOKENS = "packed-tokens"
MANIFEST_FILE = "manifest.json"
KnownManifest = DatasetManifest | MediaManifest


@dataclass(frozen=True)
class SampleKind:
    """What one sample kind plugs into the shared frame.

    Attributes:
        name: The kind (``packed-tokens``, ``image-text``, ``audio-text``, ``video-text``).
        manifest: Its manifest type (``from_doc`` builds one from parsed JSON).
        encode: Its shard writer (bytes of the tar and the index).
        decode_index: Its shard index reader.
        builder: ``module:Class`` of its batch builder (imported on first use: it needs torch).
        verify: ``module:function`` that checks every byte of a release of this kind against its manifest.
    """

    name: str
    manifest: type[DatasetManifest] | type[MediaManifest]
    encode: Callable[..., Any]
    decode_index: Callable[..., Any]
    builder: str
    verify: str

    def builder_class(self) -> Any:
        """The builder class, imported now."""
        return _imported(self.builder)

    def verifier(self) -> Callable[..., Any]:
        """The release verifier, imported now."""
        return _imported(self.verify)


def _imported(dotted: str) -> Any:
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


KINDS: dict[str, SampleKind] = {
    PACKED_TOKENS: SampleKind(
        PACKED_TOKENS,
        DatasetManifest,
        encode_shard,
        decode_index,
        "fm_loader.builders.tokens:PackedTokens",
        "fm_loader.verify:verify_token_dataset",
    ),
    "image-text": SampleKind(
        "image-text",
        MediaManifest,
        encode_media_shard,
        decode_media_index,
        "fm_loader.builders.media:ImageText",
        "fm_loader.media.verify:verify_media_dataset",
    ),
    "audio-text": SampleKind(
        "audio-text",
        MediaManifest,
        encode_media_shard,
        decode_media_index,
        "fm_loader.builders.media:AudioText",
        "fm_loader.media.verify:verify_media_dataset",
    ),
    "video-text": SampleKind(
        "video-text",
        MediaManifest,
        encode_media_shard,
        decode_media_index,
        "fm_loader.builders.video:VideoText",
        "fm_loader.media.verify:verify_media_dataset",
    ),
}


def kind_of_doc(doc: Any, where: str) -> str:
    """The sample kind a parsed manifest JSON document declares.

    Raises:
        ValueError: The document is not a JSON object, or names a kind this fm_loader does not know.
    """
    if not isinstance(doc, dict):
        raise ValueError(
            f"{where} is not an fm_loader manifest: a manifest is a JSON object, got {type(doc).__name__}"
        )
    declared = doc.get("kind")
    if declared is None:
        return PACKED_TOKENS
    kind = doc.get("modality") if declared == MEDIA_MANIFEST_KIND else declared
    if kind not in KINDS:
        raise ValueError(f"{where}: manifest kind {kind!r} is not one of {sorted(KINDS)}; upgrade fm_loader")
    return str(kind)


def manifest_location(path_or_uri: str | os.PathLike[str]) -> str:
    """``path_or_uri``, or the ``manifest.json`` inside it when it is a local release folder.

    Raises:
        FileNotFoundError: A folder without ``manifest.json``; the message names the file expected.
    """
    path = str(path_or_uri)
    if is_remote(path) or not os.path.isdir(local_path(path)):
        return path
    inside = os.path.join(path, MANIFEST_FILE)
    if not os.path.isfile(local_path(inside)):
        raise FileNotFoundError(
            f"{path} is a folder, not a manifest, and has no {MANIFEST_FILE}: pass the release's manifest "
            f"(expected {inside})"
        )
    return inside


@contextmanager
def _gc_paused() -> Iterator[None]:
    """A manifest of 100k shards is a few hundred thousand objects that all live on: the cyclic GC would walk
    every live object many times while they are created, for nothing (none is garbage yet)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def parse_manifest(data: str | bytes, location: str = "", expected: type[Manifest] = Manifest) -> Any:
    """A manifest of any kind (or of ``expected``'s kinds) from its JSON bytes.

    Raises:
        ValueError: Not JSON, not a manifest, an unknown kind, a kind ``expected`` does not read, or a format
            this fm_loader does not read; the message names ``location``.
    """
    where = location or "<manifest>"
    with _gc_paused():
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"{where} is not a manifest: it is not JSON ({exc})") from None
        if not location and isinstance(doc, dict):
            where = str(doc.get("name", where))
        kind = kind_of_doc(doc, where)
        manifest_type = KINDS[kind].manifest
        if not issubclass(manifest_type, expected):
            raise ValueError(
                f"{where} is not {expected.label} manifest (its kind is {kind!r}): read any kind with "
                "fm_loader.read_manifest (fm_loader.Loader reads every kind)"
            )
        return manifest_type.from_doc(doc, location)


def read_manifest(
    path_or_uri: str | os.PathLike[str], storage_options: dict[str, Any] | None = None
) -> Manifest:
    """Read a manifest of any kind from a local path (a release folder means its ``manifest.json``) or a URI.

    Raises:
        FileNotFoundError: Nothing at the path, or a folder without ``manifest.json``.
        ValueError: See :func:`parse_manifest`.
    """
    location = manifest_location(path_or_uri)
    return parse_manifest(read_bytes(location, storage_options), location)
