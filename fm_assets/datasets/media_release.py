"""Assembles the multimodal dataset versions (image-text, audio-text, video-text) from every batch's media shards.

Beside the text release: ``datasets/<name>-image-text[-<namespace>]/<version>/manifest.json`` (a
``fm_loader.media`` ``MediaManifest`` that references the partitions' shards by relative path, no copies)
plus ``card.json`` and ``LATEST.json``. Namespaces are walls: each namespace gets its own datasets and
``quarantine`` batches are held back until promoted. A batch is released only when its whole media chain is
current (no failed stage, no failed blocking check, every stage built from its upstream's current output);
otherwise it is held back with the reason, as for text. The version hashes the partitions' data versions.
A video-text card also has a ``video`` section (``video_card.py``: clips, seconds, stored clips and bytes).
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any

from fm_assets.compliance.licence_policy import LicencePolicy, load_policy
from fm_assets.compliance.namespaces import MODALITIES, effective_namespace, media_dataset_name
from fm_assets.datasets.release import held_back_reason, licence_held_back_reason
from fm_assets.datasets.video_card import video_card_section
from fm_assets.engine import layout
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.batch_chains import batch_chains
from fm_assets.stages.registry import MEDIA_STAGES
from fm_assets.transforms.readers.media_types import VIDEO
from fm_loader.media.manifest import MediaManifest

SHARD_STAGE = "media_shard"


def media_held_back_reason(store: ObjectStore, batch: str, policy: LicencePolicy) -> str | None:
    """Why ``batch``'s media cannot be released now (None: its media shards are current, its namespace
    is a release namespace and the licence policy admits it there)."""
    reason = held_back_reason(store, batch, MEDIA_STAGES)  # the text rule, on the media chain
    if reason is not None:
        return reason
    namespace = effective_namespace(store, batch).name
    if namespace is None:
        return "quarantine batch: released only after a recorded promotion (`fm quarantine promote`)"
    return licence_held_back_reason(store, batch, namespace, policy)


def assemble_media_release(store: ObjectStore, name: str) -> dict[str, Any]:
    """Write one version per (modality, namespace) that has samples; returns what was released."""
    held_back: list[dict[str, str]] = []
    current: list[str] = []
    policy = load_policy(store)
    for batch in list_complete_batches(store):
        if "media" not in batch_chains(store, batch):
            continue  # a text-only batch is not held back from the media releases: it was never in them
        reason = media_held_back_reason(store, batch, policy)
        if reason is None:
            current.append(batch)
        else:
            held_back.append({"batch": batch, "reason": reason})
    groups: dict[tuple[str, str], list[tuple[str, Any, MediaManifest]]] = {}
    for batch in current:
        success = read_success(store, SHARD_STAGE, batch)
        namespace = effective_namespace(store, batch).name
        assert namespace is not None  # media_held_back_reason held the others back
        for modality, rel in sorted(success.artifacts.get("manifests", {}).items()):
            manifest = MediaManifest.from_json(store.read_bytes(rel))
            groups.setdefault((modality, namespace), []).append((batch, success, manifest))
    released = []
    for (modality, namespace), parts in sorted(groups.items()):
        dataset = media_dataset_name(name, modality, namespace)
        released.append(_write_version(store, dataset, modality, namespace, parts, held_back))
    return {"released": released, "held_back": held_back}


def _write_version(
    store: ObjectStore,
    dataset: str,
    modality: str,
    namespace: str,
    parts: list[tuple[str, Any, MediaManifest]],
    held_back: list[dict[str, str]],
) -> dict[str, Any]:
    version = stable_hash([(batch, success.data_version) for batch, success, _ in parts])
    folder = layout.dataset_dir(dataset, version)
    shards = []
    for _, success, manifest in parts:
        relative = posixpath.relpath(success.prefix, folder)
        shards += [
            replace(entry, path=f"{relative}/{entry.path}", index_path=f"{relative}/{entry.index_path}")
            for entry in manifest.shards
        ]
    tokenizers = {m.tokenizer_hash for _, _, m in parts}
    first = parts[0][2]
    release = replace(
        first,
        name=dataset,
        version=version,
        shards=shards,
        namespace=namespace,
        tokenizer_hash=first.tokenizer_hash if len(tokenizers) == 1 else "",
        extra={"batches": [batch for batch, _, _ in parts], "held_back": held_back},
    )
    store.write_bytes(layout.dataset_manifest(dataset, version), release.to_json().encode())
    card = {
        "name": dataset,
        "version": version,
        "modality": MODALITIES[modality],
        "namespace": namespace,
        "samples": release.samples,
        "batches": [
            {"batch": batch, "shard_data_version": success.data_version, "samples": manifest.samples}
            for batch, success, manifest in parts
        ],
        "sources": [
            {
                k: getattr(read_batch_manifest(store, batch), k)
                for k in ("batch", "source", "license", "namespace")
            }
            for batch, _, _ in parts
        ],
        "tokenizer_sha256": release.tokenizer_hash,
        "code_version": release.code_version,
        "held_back": held_back,
    }
    if modality == VIDEO:
        card["video"] = video_card_section(store, [batch for batch, _, _ in parts])
    store.write_json(layout.dataset_card(dataset, version), card)
    store.write_json(layout.dataset_latest(dataset), {"version": version})
    return {"dataset": dataset, "version": version, "folder": folder, "samples": release.samples}
