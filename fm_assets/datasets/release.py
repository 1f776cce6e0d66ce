"""Assembles a dataset version from every batch's shards.

``datasets/<name>/<version>/manifest.json`` references the partitions' shards (relative paths; no
copies) and ``card.json`` describes where the data came from. The version is a hash of the partition
manifests, so re-running with nothing new produces the same version.
"""

import posixpath
from dataclasses import replace
from typing import Any

from fm_assets.engine import layout
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.landing import read_batch_manifest
from fm_assets.engine.refs import batches_with_ref, read_success
from fm_assets.engine.store import ObjectStore
from fm_loader.manifest import DatasetManifest


class ReleaseError(RuntimeError):
    """The partitions cannot be combined into one dataset version."""


def assemble_release(store: ObjectStore, name: str) -> dict[str, Any]:
    batches = batches_with_ref(store, "shard")
    if not batches:
        raise ReleaseError("no batch has shards yet: land data and run `fm run` first")
    manifests = []
    for batch in batches:
        success = read_success(store, "shard", batch)
        manifests.append(
            (batch, success, DatasetManifest.from_json(store.read_bytes(success.artifacts["manifest"])))
        )
    first = manifests[0][2]
    for batch, _, manifest in manifests:
        if (manifest.tokenizer_hash, manifest.vocab_size, manifest.seq_len) != (
            first.tokenizer_hash,
            first.vocab_size,
            first.seq_len,
        ):
            raise ReleaseError(
                f"batch {batch} was tokenized/packed differently (tokenizer {manifest.tokenizer_hash[:12]}, "
                f"seq_len {manifest.seq_len}) than {manifests[0][0]}; re-run it with the current settings"
            )
    version = stable_hash([(batch, success.data_version) for batch, success, _ in manifests])
    folder = layout.dataset_dir(name, version)
    shards = []
    for _, success, manifest in manifests:
        relative = posixpath.relpath(success.prefix, folder)
        shards.extend(
            replace(
                entry, path=f"{relative}/{entry.path}", index_path=f"{relative}/{entry.resolved_index_path}"
            )
            for entry in manifest.shards
        )
    release = replace(first, name=name, version=version, shards=shards, extra={"batches": batches})
    store.write_bytes(layout.dataset_manifest(name, version), release.to_json().encode())
    card = {
        "name": name,
        "version": version,
        "batches": [
            {"batch": batch, "shard_data_version": success.data_version, "rows": m.rows, "tokens": m.tokens}
            for batch, success, m in manifests
        ],
        "rows": release.rows,
        "tokens": release.tokens,
        "seq_len": release.seq_len,
        "vocab_size": release.vocab_size,
        "tokenizer_sha256": release.tokenizer_hash,
        "code_version": release.code_version,
        "sources": _sources(store, batches),
    }
    store.write_json(layout.dataset_card(name, version), card)
    store.write_json(layout.dataset_latest(name), {"version": version})
    return {"folder": folder, "version": version, "card": card}


def _sources(store: ObjectStore, batches: list[str]) -> list[dict[str, str]]:
    seen = []
    for batch in batches:
        manifest = read_batch_manifest(store, batch)
        seen.append(
            {
                "batch": batch,
                "source": manifest.source,
                "license": manifest.license,
                "namespace": manifest.namespace,
            }
        )
    return seen
