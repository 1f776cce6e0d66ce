"""The ``dataset_release`` asset: one dataset version (manifest + card) over every batch's shards, and
``media_dataset_release``: the image-text and audio-text versions over every batch's media shards.

Assembling reads every batch's shard ref and moves ``LATEST.json``, so it is one writer at a time: pool
``release`` (give it a limit of 1 in the instance's concurrency config) and, on a local root, a file lock.
"""

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from fm_assets.datasets.media_release import assemble_media_release
from fm_assets.datasets.release import assemble_release
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.locks import store_lock

RELEASE_LOCK = "release"  # store_lock and Dagster pool name


@asset(
    group_name="release",
    deps=["shard"],
    required_resource_keys={"store", "pipeline"},
    pool=RELEASE_LOCK,
    description="Dataset version manifest + card over every batch's shards.",
)
def dataset_release(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    with store_lock(store, RELEASE_LOCK):  # a release that read older refs must not move LATEST.json last
        result = assemble_release(store, context.resources.pipeline.dataset_name)
    for entry in result["card"]["held_back"]:
        context.log.warning(f"held back {entry['batch']}: {entry['reason']}")
    return MaterializeResult(
        data_version=DataVersion(result["version"]),
        metadata={
            "manifest": MetadataValue.path(store.uri(f"{result['folder']}/manifest.json")),
            "rows": result["card"]["rows"],
            "tokens": result["card"]["tokens"],
            "batches": len(result["card"]["batches"]),
            # batches whose chain failed (or is stale) are left out, the rest released: same as `fm run`
            "held_back": MetadataValue.json(result["card"]["held_back"]),
        },
    )


@asset(
    group_name="release",
    deps=["media_shard"],
    required_resource_keys={"store", "pipeline"},
    pool=RELEASE_LOCK,
    description="Multimodal dataset versions (image-text, audio-text per namespace) over every batch's media shards.",
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
            "held_back": MetadataValue.json(result["held_back"]),
        },
    )
