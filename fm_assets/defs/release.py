"""The ``dataset_release`` asset: one dataset version (manifest + card) over every batch's shards."""

from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from fm_assets.datasets.release import assemble_release


@asset(
    group_name="release",
    deps=["shard"],
    required_resource_keys={"store", "pipeline"},
    description="Dataset version manifest + card over every batch's shards.",
)
def dataset_release(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    result = assemble_release(store, context.resources.pipeline.dataset_name)
    return MaterializeResult(
        data_version=DataVersion(result["version"]),
        metadata={
            "manifest": MetadataValue.path(store.uri(f"{result['folder']}/manifest.json")),
            "rows": result["card"]["rows"],
            "tokens": result["card"]["tokens"],
            "batches": len(result["card"]["batches"]),
        },
    )
