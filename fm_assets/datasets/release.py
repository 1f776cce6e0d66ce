"""Assembles a dataset version from every batch's shards.

``datasets/<name>/<version>/manifest.json`` references the partitions' shards (relative paths; no
copies) and ``card.json`` describes where the data came from. The version is a hash of the partition
manifests, so re-running with nothing new produces the same version.
"""

import itertools
import posixpath
from dataclasses import replace
from typing import Any

from fm_assets.engine import layout
from fm_assets.engine.checks import read_check_outcomes, stage_checks
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.refs import batches_with_ref, read_failure, read_ref, read_success
from fm_assets.engine.stage import Stage
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import STAGE_NAMES
from fm_assets.stages.registry import STAGES
from fm_loader.manifest import DatasetManifest


class ReleaseError(RuntimeError):
    """The partitions cannot be combined into one dataset version."""


def held_back_reason(store: ObjectStore, batch: str) -> str | None:
    """Why ``batch`` cannot be released now (None: its shards are current).

    A batch is released only when its whole chain succeeded: no stage's latest materialization failed
    (``refs.record_failure``), no blocking check failed on a stage's current output, and every stage's current
    output was built from its upstream's current output. A batch whose latest run failed keeps the shard ref
    of an earlier good run; those shards are held back too, not released as if current (the previous release
    still has them).
    """
    current: dict[str, str] = {}
    for stage in STAGES:
        failure = read_failure(store, stage.name, batch)
        if failure is not None:
            return f"its last {stage.name} run failed ({failure}); fix it and `fm run {batch}`"
        ref = read_ref(store, stage.name, batch)
        if ref is None:
            return f"{stage.name} has no output yet (run `fm run {batch}`)"
        current[stage.name] = ref.data_version
        failed = _failed_blocking_check(store, stage, ref.prefix)
        if failed is not None:
            return (
                f"{stage.name}'s check {failed} failed on its current output, so the stages after it did not "
                f"run (`fm report {batch}` shows the check's numbers; fix it and `fm run {batch}`)"
            )
    for upstream, stage in itertools.pairwise(STAGE_NAMES):
        try:
            built_from = read_success(store, stage, batch).inputs.get(upstream)
        except (OSError, ValueError) as exc:
            return (
                f"{stage}'s output cannot be read ({type(exc).__name__}); `fm verify` / `fm repair {batch}`"
            )
        if built_from != current[upstream]:
            return (
                f"{stage}'s output was built from an older {upstream} output: its last run failed or has not run "
                f"since (`fm run {batch}`; `fm report {batch}` shows which stage)"
            )
    return None


def _failed_blocking_check(store: ObjectStore, stage: Stage, prefix: str) -> str | None:
    outcomes = read_check_outcomes(store, prefix)
    for check in stage_checks(stage):
        outcome = outcomes.get(check.name)
        if check.blocking and not check.warn_only and outcome is not None and not outcome.passed:
            return check.name
    return None


def latest_held_back(store: ObjectStore, name: str) -> list[dict[str, str]]:
    """The batches the latest version of dataset ``name`` held back, with the reason ([] if none)."""
    rel = layout.dataset_latest(name)
    if not store.exists(rel):
        return []
    version = store.read_json(rel)["version"]
    return list(store.read_json(layout.dataset_card(name, version)).get("held_back", []))


def assemble_release(store: ObjectStore, name: str) -> dict[str, Any]:
    """Assemble a version from every batch whose shards are current; batches that are not (a failed run) are
    held back and listed with the reason in the card and the manifest, never released stale or silently."""
    held_back = []
    batches = []
    for batch in sorted(set(batches_with_ref(store, "shard")) | set(list_complete_batches(store))):
        reason = held_back_reason(store, batch)
        if reason is None:
            batches.append(batch)
        else:
            held_back.append({"batch": batch, "reason": reason})
    if not batches:
        detail = f" ({len(held_back)} held back: {held_back[0]['reason']})" if held_back else ""
        raise ReleaseError(f"no batch has current shards yet: land data and run `fm run` first{detail}")
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
    release = replace(
        first,
        name=name,
        version=version,
        shards=shards,
        extra={"batches": batches, "held_back": held_back},
        format_version=max(m.format_version for _, _, m in manifests),  # 3 once any batch has token columns
    )
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
        "held_back": held_back,
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
