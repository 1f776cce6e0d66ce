"""Assembles one dataset version per release namespace from the shards of that namespace's batches.

Namespaces are walls: the ``cloud`` release is ``datasets/<name>/``, the ``on_device`` one
``datasets/<name>-on_device/`` (``compliance.namespaces.release_name``); each holds only batches whose
effective namespace (landed, or promoted out of quarantine) is its own, and its manifest records that
namespace. ``manifest.json`` references the partitions' shards (relative paths; no copies) and ``card.json``
describes where the data came from. A batch is held back, with the reason, when its chain is not current or
its licence is outside the namespace's release policy (``compliance.licence_policy``). The version is a hash
of the partition manifests, so re-running with nothing new produces the same version.
"""

import itertools
import logging
import posixpath
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from fm_assets.compliance.licence_policy import LicencePolicy, load_policy
from fm_assets.compliance.namespaces import (
    assert_within,
    check_release_namespace,
    effective_namespace,
    release_name,
)
from fm_assets.compliance.promotions import RELEASE_NAMESPACES, ReviewError
from fm_assets.datasets.card import write_card
from fm_assets.engine import layout
from fm_assets.engine.checks import read_check_outcomes, stage_checks
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.landing import (
    LandingError,
    list_complete_batches,
    read_batch_manifest,
)
from fm_assets.engine.refs import batches_with_ref, read_failure, read_ref, read_success
from fm_assets.engine.stage import Stage
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.batch_chains import batch_chains
from fm_assets.stages.registry import TEXT_STAGES
from fm_loader.manifest import DatasetManifest

log = logging.getLogger(__name__)


class ReleaseError(RuntimeError):
    """The partitions cannot be combined into one dataset version."""


NOT_RUN_YET = (
    "has no output yet"  # a held-back reason that says the batch is not processed yet, not that it failed
)


def not_run_yet(reason: str) -> bool:
    """Whether a held-back ``reason`` only says the batch has not been processed yet (it may be in another run)."""
    return NOT_RUN_YET in reason


def held_back_reason(store: ObjectStore, batch: str, chain: Sequence[Stage]) -> str | None:
    """Why ``batch`` cannot be released now (None: the last stage of ``chain`` is current).

    A batch is released only when its whole chain succeeded: no stage's latest materialization failed
    (``refs.record_failure``), no blocking check failed on a stage's current output, and every stage's current
    output was built from its upstream's current output. A batch whose latest run failed keeps the shard ref
    of an earlier good run; those shards are held back too, not released as if current (the previous release
    still has them).
    """
    current: dict[str, str] = {}
    for stage in chain:
        failure = read_failure(store, stage.name, batch)
        if failure is not None:
            return f"its last {stage.name} run failed ({failure}); fix it and `fm run {batch}`"
        ref = read_ref(store, stage.name, batch)
        if ref is None:
            return f"{stage.name} {NOT_RUN_YET} (run `fm run {batch}`)"
        current[stage.name] = ref.data_version
        failed = _failed_blocking_check(store, stage, ref.prefix)
        if failed is not None:
            return (
                f"{stage.name}'s check {failed} failed on its current output, so the stages after it did not "
                f"run (`fm report {batch}` shows the check's numbers; fix it and `fm run {batch}`)"
            )
    for upstream, stage in itertools.pairwise([s.name for s in chain]):
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


def licence_held_back_reason(
    store: ObjectStore, batch: str, namespace: str, policy: LicencePolicy
) -> str | None:
    """Why ``namespace``'s release may not hold ``batch`` under the licence policy (None: it may)."""
    manifest = read_batch_manifest(store, batch)
    decision = policy.decide(manifest.license, manifest.source, namespace)
    if decision.admitted:
        return None
    return (
        f"{decision.reason}; a batch outside the policy is held, not released (an approved exception in "
        f"{policy.origin} admits it: license, source, namespace, approver, reason)"
    )


def latest_held_back(store: ObjectStore, name: str) -> list[dict[str, str]]:
    """The batches the latest versions of dataset ``name`` and of every release derived from it (other
    namespaces, image-text, audio-text, video-text) held back, with the reason; each (batch, reason) once."""
    held: list[dict[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for dataset, version in sorted(latest_versions(store, name).items()):
        card = layout.dataset_card(dataset, version)
        for entry in store.read_json(card).get("held_back", []) if store.exists(card) else []:
            if (entry["batch"], entry["reason"]) not in seen:
                seen.add((entry["batch"], entry["reason"]))
                held.append(entry)
    return held


def latest_versions(store: ObjectStore, name: str) -> dict[str, str]:
    """Dataset -> its latest version, for ``name`` and every release derived from it (other namespaces, image-text
    and audio-text)."""
    found: dict[str, str] = {}
    for entry in sorted(store.list("datasets")):
        dataset = entry.rstrip("/").rsplit("/", 1)[-1]
        rel = layout.dataset_latest(dataset)
        if (dataset == name or dataset.startswith(f"{name}-")) and store.exists(rel):
            found[dataset] = store.read_json(rel)["version"]
    return found


def namespace_candidates(store: ObjectStore) -> dict[str, list[str]]:
    """Release namespace -> the text batches (landed or with shards) whose effective namespace it is.
    Quarantine batches without a promotion belong to none: they are never released; batches without text
    (``batch_chains``) are the media releases' only."""
    found: dict[str, list[str]] = {namespace: [] for namespace in RELEASE_NAMESPACES}
    for batch in sorted(set(batches_with_ref(store, "shard")) | set(list_complete_batches(store))):
        try:
            if "text" not in batch_chains(store, batch):
                continue  # a media-only batch is not held back from the text release: it was never in it
            namespace = effective_namespace(store, batch).name
        except (
            LandingError,
            ReviewError,
        ) as exc:  # shards without a readable landing: no namespace to trust
            log.warning("batch %s is in no release: %s", batch, exc)
            continue
        if namespace in found:
            found[namespace].append(batch)
    return found


def assemble_releases(store: ObjectStore, name: str) -> dict[str, dict[str, Any]]:
    """One release per namespace that has batches: namespace -> ``assemble_release``'s result, or
    ``{"error": ...}`` for a namespace none of whose batches can be released now. ``ReleaseError`` if no
    namespace could be released. A root without text batches (media only) has no text release to write:
    ``{}``, not an error (its media releases are ``media_dataset_release``'s)."""
    policy = load_policy(store)
    results: dict[str, dict[str, Any]] = {}
    candidates = namespace_candidates(store)
    if not any(candidates.values()):
        log.info("no text batch in any release namespace: no text release to write")
        return results
    for namespace, batches in candidates.items():
        if not batches:
            continue
        try:
            results[namespace] = assemble_release(store, name, namespace, batches=batches, policy=policy)
        except ReleaseError as exc:
            log.warning("release %s not written: %s", release_name(name, namespace), exc)
            results[namespace] = {"error": str(exc)}
    released = {ns: result for ns, result in results.items() if "error" not in result}
    if not released:
        errors = "; ".join(f"{ns}: {result['error']}" for ns, result in results.items())
        raise ReleaseError(errors or "no batch has current shards yet: land data and run `fm run` first")
    return results


def assemble_release(
    store: ObjectStore,
    name: str,
    namespace: str = "cloud",
    *,
    batches: list[str] | None = None,
    policy: LicencePolicy | None = None,
) -> dict[str, Any]:
    """Assemble ``namespace``'s version from every batch of that namespace whose shards are current and whose
    licence its policy admits; the others are held back and listed with the reason in the card and the
    manifest, never released stale or silently. ``batches`` (default: the namespace's) must all belong to
    ``namespace``: a batch of another namespace is refused (``NamespaceWallError``), never mixed in."""
    check_release_namespace(namespace)
    dataset = release_name(name, namespace)
    candidates = namespace_candidates(store)[namespace] if batches is None else list(batches)
    assert_within(store, candidates, namespace, f"release {dataset}")
    policy = policy or load_policy(store)
    held_back = []
    released = []
    for batch in candidates:
        reason = held_back_reason(store, batch, TEXT_STAGES) or licence_held_back_reason(
            store, batch, namespace, policy
        )
        if reason is None:
            released.append(batch)
        else:
            held_back.append({"batch": batch, "reason": reason})
    batches = released
    if not batches:
        detail = f" ({len(held_back)} held back: {held_back[0]['reason']})" if held_back else ""
        raise ReleaseError(
            f"no {namespace} batch has current shards yet: land data and run `fm run` first{detail}"
        )
    manifests = []
    for batch in batches:
        success = read_success(store, "shard", batch)
        manifests.append(
            (
                batch,
                success,
                DatasetManifest.from_json(store.read_bytes(success.artifacts["manifest"])),
            )
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
    folder = layout.dataset_dir(dataset, version)
    shards = []
    for _, success, manifest in manifests:
        relative = posixpath.relpath(success.prefix, folder)
        shards.extend(
            replace(
                entry,
                path=f"{relative}/{entry.path}",
                index_path=f"{relative}/{entry.resolved_index_path}",
            )
            for entry in manifest.shards
        )
    release = replace(
        first,
        name=dataset,
        version=version,
        namespace=namespace,
        revoked=None,
        shards=shards,
        extra={"batches": batches, "held_back": held_back},
        format_version=max(m.format_version for _, _, m in manifests),  # 3 once any batch has token columns
    )
    store.write_bytes(layout.dataset_manifest(dataset, version), release.to_json().encode())
    card = {
        "name": dataset,
        "version": version,
        "namespace": namespace,
        # per batch: where it came from, its namespace as landed and as released, and the licence exception
        # that admitted it, if one did ("sources" is the card's per-source summary, datasets/card.py)
        "batches": [
            {
                "batch": batch,
                "shard_data_version": success.data_version,
                "rows": m.rows,
                "tokens": m.tokens,
                **provenance,
            }
            for (batch, success, m), provenance in zip(
                manifests, _provenance(store, batches, namespace, policy), strict=True
            )
        ],
        "rows": release.rows,
        "tokens": release.tokens,
        "seq_len": release.seq_len,
        "vocab_size": release.vocab_size,
        "tokenizer_sha256": release.tokenizer_hash,
        "code_version": release.code_version,
        "held_back": held_back,
        "licence_policy": {"origin": policy.origin, "sha256": policy.sha256},
    }
    card = write_card(store, dataset, version, card)  # card.md + plots; returns the card.json content
    store.write_json(layout.dataset_card(dataset, version), card)
    store.write_json(layout.dataset_latest(dataset), {"version": version})
    return {
        "folder": folder,
        "name": dataset,
        "namespace": namespace,
        "version": version,
        "card": card,
    }


def _provenance(
    store: ObjectStore, batches: list[str], namespace: str, policy: LicencePolicy
) -> list[dict[str, Any]]:
    seen = []
    for batch in batches:
        manifest = read_batch_manifest(store, batch)
        effective = effective_namespace(store, batch)
        entry: dict[str, Any] = {
            "source": manifest.source,
            "license": manifest.license,
            "namespace": effective.name,
            "landed_namespace": manifest.namespace,
        }
        exception = policy.decide(manifest.license, manifest.source, namespace).exception
        if exception is not None:  # admitted only by an approved exception: the card says by whom
            entry["licence_exception"] = exception.to_json()
        seen.append(entry)
    return seen
