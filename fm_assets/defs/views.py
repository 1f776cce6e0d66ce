"""The view assets: the Iceberg table of curated documents, the Lance documents view and the Lance media views
(images with thumbnails, audio).

Each commits shared state, so each is in a pool of its own (``iceberg``, ``lance``: give them a limit of 1
in the instance's concurrency config); on a local root the sync also holds a file lock (datasets/views.py).
"""

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from fm_assets.datasets.media_views import SHARD_STAGE as MEDIA_SHARD_STAGE
from fm_assets.datasets.media_views import media_lance_uris, write_media_lance
from fm_assets.datasets.views import (
    CURATED_TABLE,
    ICEBERG_LOCK,
    LANCE_LOCK,
    SOURCE_STAGE,
    TOKENS_STAGE,
    expected_curated_rows,
    sync_curated_documents,
    write_documents_lance,
)


@asset(
    group_name="release",
    deps=[SOURCE_STAGE],
    required_resource_keys={"store", "iceberg"},
    code_version="curated-v1",
    pool=ICEBERG_LOCK,
    check_specs=[AssetCheckSpec("rows_match_decontaminate", asset="curated_documents")],
    description="Iceberg table fm.curated_documents: every batch's decontaminated documents, partitioned by batch.",
)
def curated_documents(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    sync = sync_curated_documents(store, context.resources.iceberg.catalog())
    expected = expected_curated_rows(store)
    return MaterializeResult(
        data_version=DataVersion(sync.data_version),
        metadata={
            "table": CURATED_TABLE,
            "snapshot_id": MetadataValue.int(sync.snapshot_id) if sync.snapshot_id is not None else "none",
            "rows": sync.rows,
            "batches": len(sync.versions),
            "batches_replaced": len(sync.changed),
            "batches_removed": len(sync.removed),
            "rows_written": sync.rows_written,
        },
        check_results=[
            AssetCheckResult(
                check_name="rows_match_decontaminate",
                passed=sync.rows == expected,
                metadata={"table_rows": sync.rows, "decontaminate_records_out": expected},
            )
        ],
    )


@asset(
    group_name="release",
    deps=[SOURCE_STAGE, TOKENS_STAGE],
    required_resource_keys={"store", "lance"},
    code_version="documents-lance-v1",
    pool=LANCE_LOCK,
    description="Lance dataset of per-document stats (source, licence, language, quality, chars, tokens, PII flags).",
)
def documents_lance(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    lance_resource = context.resources.lance
    result = write_documents_lance(
        store, lance_resource.documents(), lance_resource.storage_options() or None
    )
    return MaterializeResult(
        data_version=DataVersion(result["inputs_version"]),
        metadata={
            "uri": MetadataValue.path(lance_resource.documents()),
            "lance_version": result["version"],
            "rows": result["rows"],
            "written": result["written"],
        },
    )


VIEW_ASSETS = [curated_documents, documents_lance]


@asset(
    group_name="release",
    deps=[MEDIA_SHARD_STAGE],
    required_resource_keys={"store", "lance"},
    code_version="media-lance-v1",
    pool=LANCE_LOCK,
    description="Lance datasets images (with thumbnails) and audio: one row per sample in the media shards.",
)
def media_lance(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    lance_resource = context.resources.lance
    uris = media_lance_uris(lance_resource.documents())
    result = write_media_lance(store, uris, lance_resource.storage_options() or None)
    return MaterializeResult(
        data_version=DataVersion(result["inputs_version"]),
        metadata={
            "images_uri": MetadataValue.path(uris["image"]),
            "audio_uri": MetadataValue.path(uris["audio"]),
            "images": result["image"]["rows"],
            "audio": result["audio"]["rows"],
        },
    )


VIEW_ASSETS = [*VIEW_ASSETS, media_lance]
