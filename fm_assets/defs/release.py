"""The ``dataset_release`` asset: one dataset version (manifest + card) per release namespace, and
``media_dataset_release``: the image-text and audio-text versions, also one per namespace.

Namespaces are walls: ``cloud`` batches go to ``datasets/<name>/``, ``on_device`` ones to
``datasets/<name>-on_device/`` (``datasets/release.py``). Assembling reads every batch's shard ref and moves
``LATEST.json``, so it is one writer at a time: pool ``release`` (give it a limit of 1 in the instance's
concurrency config) and, on a local root, a file lock.
"""

from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from fm_assets.compliance.namespaces import DEFAULT_NAMESPACE
from fm_assets.datasets.media_release import assemble_media_release
from fm_assets.datasets.release import assemble_releases
from fm_assets.defs.conventions import ROW_COUNT
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.locks import store_lock

RELEASE_LOCK = "release"  # store_lock and Dagster pool name
HELD_BACK_CHECK = "no_batch_held_back"


def held_back_spec(asset_name: str) -> AssetCheckSpec:
    return AssetCheckSpec(
        HELD_BACK_CHECK,
        asset=asset_name,
        description="Every landed batch of this release's chain is in it: a batch held back (its chain failed "
        "or is stale, its licence is outside the policy) fails this check at WARN level and is named with "
        "its reason.",
    )


def held_back_result(held_back: list[dict[str, str]]) -> AssetCheckResult:
    """The release's held-back check: green only when no batch was left out (the release is still written)."""
    return AssetCheckResult(
        check_name=HELD_BACK_CHECK,
        passed=not held_back,
        severity=AssetCheckSeverity.WARN,
        metadata={"held_back": MetadataValue.json(held_back), "batches_held_back": len(held_back)},
        description="; ".join(f"{h['batch']}: {h['reason']}" for h in held_back) or "no batch held back",
    )


@asset(
    group_name="release",
    deps=["shard"],
    required_resource_keys={"store", "pipeline"},
    pool=RELEASE_LOCK,
    description="Dataset version manifest + card per namespace (cloud, on_device) over its batches' shards.",
    check_specs=[held_back_spec("dataset_release")],
)
def dataset_release(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    with store_lock(store, RELEASE_LOCK):  # a release that read older refs must not move LATEST.json last
        results = assemble_releases(store, context.resources.pipeline.dataset_name)
    metadata: dict[str, Any] = {}
    versions = {}
    held_back: list[dict[str, str]] = []
    for namespace, result in sorted(results.items()):
        if "error" in result:
            context.log.warning(f"no {namespace} release written: {result['error']}")
            metadata[f"{namespace}_error"] = result["error"]
            continue
        card = result["card"]
        versions[namespace] = result["version"]
        prefix = "" if namespace == DEFAULT_NAMESPACE else f"{namespace}_"  # cloud keeps the historical keys
        for entry in card["held_back"]:
            context.log.warning(f"{namespace}: held back {entry['batch']}: {entry['reason']}")
            held_back.append({**entry, "namespace": namespace})
        metadata[f"{prefix}manifest"] = MetadataValue.path(store.uri(f"{result['folder']}/manifest.json"))
        metadata[f"{prefix}rows"] = card["rows"]
        metadata[f"{prefix}tokens"] = card["tokens"]
        metadata[f"{prefix}batches"] = len(card["batches"])
        # batches whose chain failed (or is stale) or whose licence is outside the policy are left out
        metadata[f"{prefix}held_back"] = MetadataValue.json(card["held_back"])
    metadata[ROW_COUNT] = sum(r["card"]["rows"] for r in results.values() if "card" in r)  # every namespace
    return MaterializeResult(
        data_version=DataVersion(stable_hash(sorted(versions.items()))),
        metadata=metadata,
        check_results=[held_back_result(held_back)],
    )


@asset(
    group_name="release",
    deps=["media_shard"],
    required_resource_keys={"store", "pipeline"},
    pool=RELEASE_LOCK,
    description="Multimodal dataset versions (image-text, audio-text per namespace) over every batch's media shards.",
    check_specs=[held_back_spec("media_dataset_release")],
)
def media_dataset_release(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    with store_lock(store, RELEASE_LOCK):
        result = assemble_media_release(store, context.resources.pipeline.dataset_name)
    for entry in result["held_back"]:
        context.log.warning(f"media of {entry['batch']} held back: {entry['reason']}")
    return MaterializeResult(
        data_version=DataVersion(stable_hash([r["version"] for r in result["released"]])),
        metadata={
            "released": MetadataValue.json(result["released"]),
            "samples": sum(r["samples"] for r in result["released"]),
            ROW_COUNT: sum(r["samples"] for r in result["released"]),
            "held_back": MetadataValue.json(result["held_back"]),
        },
        check_results=[held_back_result(result["held_back"])],
    )
