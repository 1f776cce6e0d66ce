"""Namespaces as walls: a batch's effective namespace, and the per-namespace names of releases and views.

A batch's effective namespace is the one it was landed in, except for ``quarantine``: such a batch has
none until a reviewer promotes it (then: the promotion's target) and is never processed before that, nor
after a rejection (``QuarantinedBatchError``). Each release namespace gets its own dataset release, Iceberg
table and Lance dataset; the ``cloud`` ones keep the names used before namespaces were walls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fm_assets.compliance.promotions import (
    QUARANTINE,
    RELEASE_NAMESPACES,
    read_decision,
)
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.store import ObjectStore

DEFAULT_NAMESPACE = "cloud"  # keeps the historical names (dataset, Iceberg table, Lance dataset)
CURATED_TABLE = "fm.curated_documents"


class QuarantinedBatchError(RuntimeError):
    """A quarantine batch that has not been promoted (or was rejected) must not be processed."""


class NamespaceWallError(RuntimeError):
    """Data of one namespace was about to enter another namespace's release or view."""


@dataclass(frozen=True)
class EffectiveNamespace:
    batch: str
    landed: str
    name: str | None  # the namespace it is processed and released in; None while not processable
    status: str  # "landed", "promoted", "awaiting_review" or "rejected"
    decision_sha256: str | None = None  # the promotion record's hash (part of the land stage's key)


def effective_namespace(store: ObjectStore, batch: str) -> EffectiveNamespace:
    landed = read_batch_manifest(store, batch).namespace
    if landed != QUARANTINE:
        return EffectiveNamespace(batch, landed, landed, "landed")
    decision = read_decision(store, batch)
    if decision is None:
        return EffectiveNamespace(batch, landed, None, "awaiting_review")
    if decision.action == "reject":
        return EffectiveNamespace(batch, landed, None, "rejected", decision.sha256())
    return EffectiveNamespace(batch, landed, decision.to, "promoted", decision.sha256())


def require_processable(store: ObjectStore, batch: str) -> EffectiveNamespace:
    """The batch's effective namespace; ``QuarantinedBatchError`` (with what to do) if it has none."""
    namespace = effective_namespace(store, batch)
    if namespace.status == "awaiting_review":
        raise QuarantinedBatchError(
            f"batch {batch} is in quarantine awaiting review and is not processed; a reviewer decides with "
            f"`fm quarantine promote {batch} --to cloud --reviewer NAME --reason TEXT` or "
            f"`fm quarantine reject {batch} --reviewer NAME --reason TEXT`"
        )
    if namespace.status == "rejected":
        raise QuarantinedBatchError(f"batch {batch} was rejected in quarantine review and is never processed")
    return namespace


def release_name(dataset: str, namespace: str) -> str:
    """The dataset release of ``namespace``: ``<dataset>`` for cloud, ``<dataset>-<namespace>`` otherwise."""
    check_release_namespace(namespace)
    return dataset if namespace == DEFAULT_NAMESPACE else f"{dataset}-{namespace}"


MODALITIES = {"image": "image-text", "audio": "audio-text", "video": "video-text"}  # media modality -> suffix


def media_dataset_name(name: str, modality: str, namespace: str) -> str:
    """``<name>-image-text`` for cloud, ``<name>-image-text-<namespace>`` otherwise (text's naming rule)."""
    return release_name(f"{name}-{MODALITIES[modality]}", namespace)


def curated_table_name(namespace: str) -> str:
    """The Iceberg table of ``namespace``'s curated documents."""
    check_release_namespace(namespace)
    return CURATED_TABLE if namespace == DEFAULT_NAMESPACE else f"{CURATED_TABLE}_{namespace}"


def lance_uri(cloud_uri: str, namespace: str) -> str:
    """The Lance documents dataset of ``namespace``, beside the cloud one (``documents_<ns>.lance``)."""
    check_release_namespace(namespace)
    if namespace == DEFAULT_NAMESPACE:
        return cloud_uri
    stem, dot, suffix = cloud_uri.rstrip("/").rpartition(".")
    return (
        f"{stem}_{namespace}.{suffix}"
        if dot and "/" not in suffix
        else f"{cloud_uri.rstrip('/')}_{namespace}"
    )


def media_lance_uris(documents_uri: str, namespace: str = DEFAULT_NAMESPACE) -> dict[str, str]:
    """The images, audio and video datasets of ``namespace`` beside the documents dataset (``images.lance`` for
    cloud, ``images_<namespace>.lance`` otherwise: namespaces are walls, as for documents)."""
    folder = documents_uri.rsplit("/", 1)[0]
    return {
        "image": lance_uri(f"{folder}/images.lance", namespace),
        "audio": lance_uri(f"{folder}/audio.lance", namespace),
        "video": lance_uri(f"{folder}/videos.lance", namespace),
    }


def check_release_namespace(namespace: str) -> None:
    if namespace not in RELEASE_NAMESPACES:
        raise NamespaceWallError(
            f"{namespace!r} is not a release namespace ({', '.join(RELEASE_NAMESPACES)}); quarantine data is "
            "released only after a reviewer promotes it"
        )


def batches_in(store: ObjectStore, batches: list[str], namespace: str) -> list[str]:
    """The batches among ``batches`` whose effective namespace is ``namespace``."""
    return [batch for batch in batches if effective_namespace(store, batch).name == namespace]


def assert_within(store: ObjectStore, batches: list[str], namespace: str, what: str) -> None:
    """Refuse (``NamespaceWallError``) if any of ``batches`` belongs to another namespace than ``namespace``."""
    foreign = [
        (batch, effective.name or effective.status)
        for batch in batches
        if (effective := effective_namespace(store, batch)).name != namespace
    ]
    if foreign:
        listed = ", ".join(f"{batch} ({name})" for batch, name in foreign[:5])
        raise NamespaceWallError(
            f"{what} is for namespace {namespace!r} but would include {len(foreign)} batch(es) of another "
            f"namespace: {listed}. Namespaces are walls: each namespace has its own release and views"
        )


@dataclass(frozen=True)
class ReviewSplit:
    processable: list[str]
    awaiting_review: list[str]
    rejected: list[str]


def split_by_review(store: ObjectStore, batches: list[str]) -> ReviewSplit:
    """``batches`` sorted into those that may be processed, those awaiting quarantine review, and rejected."""
    split = ReviewSplit([], [], [])
    for batch in batches:
        status = effective_namespace(store, batch).status
        bucket = {
            "awaiting_review": split.awaiting_review,
            "rejected": split.rejected,
        }.get(status)
        (bucket if bucket is not None else split.processable).append(batch)
    return split


def quarantine_rows(store: ObjectStore) -> list[dict[str, Any]]:
    """Every batch landed in quarantine, with its review status and decision."""
    rows = []
    for batch in list_complete_batches(store):
        manifest = read_batch_manifest(store, batch)
        if manifest.namespace != QUARANTINE:
            continue
        decision = read_decision(store, batch)
        rows.append(
            {
                "batch": batch,
                "source": manifest.source,
                "license": manifest.license,
                "files": len(manifest.files),
                "status": effective_namespace(store, batch).status,
                "decision": decision.to_json() if decision else None,
            }
        )
    return rows
