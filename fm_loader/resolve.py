"""What a :class:`fm_loader.Loader` was given, resolved to a sample kind and what its builder reads.

A mixture (YAML or dict) or a text manifest is packed tokens; one or more media manifests (paths, URIs or
objects) are their kind, all the same one, each checked against the namespaces and revocations allowed.
"""

from __future__ import annotations

import os
from typing import Any

from fm_loader.access import check_release
from fm_loader.kinds import PACKED_TOKENS, read_manifest
from fm_loader.manifest import DatasetManifest
from fm_loader.media.manifest import MediaManifest
from fm_loader.options import AccessOptions


def _is_mixture(source: Any) -> bool:
    return isinstance(source, dict) or (
        isinstance(source, (str, os.PathLike)) and str(source).endswith((".yaml", ".yml"))
    )


def _media_manifests(items: list[Any], storage_options: dict[str, Any] | None) -> list[MediaManifest]:
    out = []
    for item in items:
        manifest = item if isinstance(item, MediaManifest) else read_manifest(item, storage_options)
        if not isinstance(manifest, MediaManifest):
            raise ValueError(
                f"{item}: a list of sources holds media manifests of one kind, got a {manifest.kind} one"
            )
        out.append(manifest)
    return out


def resolve_source(
    source: Any, storage_options: dict[str, Any] | None, access: AccessOptions, loader_name: str = "Loader"
) -> tuple[str, Any]:
    """(the sample kind, what its builder reads: the mixture/manifest, or the list of media manifests)."""
    if _is_mixture(source) or isinstance(source, DatasetManifest):
        return PACKED_TOKENS, source
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise ValueError("a Loader needs at least one manifest")
    for item in items:
        if not isinstance(item, (str, os.PathLike, MediaManifest)):
            raise TypeError(
                f"unsupported source {item!r}: give a manifest path or URI, a mixture or a manifest"
            )
    if len(items) == 1 and not isinstance(items[0], MediaManifest):
        manifest = read_manifest(items[0], storage_options)
        if isinstance(manifest, DatasetManifest):
            return PACKED_TOKENS, manifest
    manifests = _media_manifests(items, storage_options)
    for m in manifests:
        where = m.location or m.name
        check_release(m.namespace, m.revoked, where, tuple(access.allowed_namespaces), access.allow_revoked)
    kinds = {m.kind for m in manifests}
    if len(kinds) != 1:
        raise ValueError(
            f"one {loader_name} reads one modality, got {sorted(kinds)}; mix them with ModalityMixture"
        )
    return kinds.pop(), manifests
