"""The view assets: the Iceberg tables of curated documents and the Lance documents views, one per namespace,
and the Lance media views (images with thumbnails, audio).

Each commits shared state, so each is in a pool of its own (``iceberg``, ``lance``: give them a limit of 1
in the instance's concurrency config); on a local root the sync also holds a file lock (datasets/views.py).
Metadata of the cloud view keeps its historical keys; other namespaces' keys are prefixed with the namespace.
"""

from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from fm_assets.compliance.namespaces import (
    DEFAULT_NAMESPACE,
    curated_table_name,
    lance_uri,
    media_lance_uris,
)
from fm_assets.compliance.promotions import RELEASE_NAMESPACES
from fm_assets.datasets.media_views import SHARD_STAGE as MEDIA_SHARD_STAGE
from fm_assets.datasets.media_views import write_media_lance
from fm_assets.datasets.views import (
    ICEBERG_LOCK,
    LANCE_LOCK,
    SOURCE_STAGE,
    TOKENS_STAGE,
    curated_table,
    expected_curated_rows,
    foreign_rows,
    stage_versions,
    sync_curated_namespaces,
    write_documents_lance_namespaces,
)
from fm_assets.defs.conventions import ROW_COUNT
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.pool import metered_spread, resolve_workers, spread_over


def _prefix(namespace: str) -> str:
    return "" if namespace == DEFAULT_NAMESPACE else f"{namespace}_"


@asset(
    group_name="release",
    deps=[SOURCE_STAGE],
    required_resource_keys={"store", "iceberg", "pipeline"},
    code_version="curated-v2",
    pool=ICEBERG_LOCK,
    check_specs=[
        AssetCheckSpec("rows_match_decontaminate", asset="curated_documents"),
        AssetCheckSpec(
            "namespace_wall",
            asset="curated_documents",
            description="No table holds a row of another namespace.",
        ),
    ],
    description="Iceberg tables fm.curated_documents (cloud) and fm.curated_documents_<namespace>: each "
    "namespace's decontaminated documents, partitioned by batch.",
)
def curated_documents(context: AssetExecutionContext) -> MaterializeResult:
    store = context.resources.store.store()
    catalog = context.resources.iceberg.catalog()
    # the data files are written on the worker pool (the batch's text copied in parallel), the commit here
    with spread_over(resolve_workers(context.resources.pipeline.workers)), metered_spread() as spread:
        synced = sync_curated_namespaces(store, catalog)
    # what spread over the workers (bench/scale.py counts it as parallel work, the rest of the step as serial)
    metadata: dict[str, Any] = {
        "spread_tasks": spread.tasks,
        "spread_task_seconds": round(spread.task_seconds, 3),
    }
    rows_ok, rows_meta, foreign = True, {}, {}
    for namespace, sync in synced.items():
        prefix = _prefix(namespace)
        expected = expected_curated_rows(store, namespace)
        rows_ok = rows_ok and sync.rows == expected
        rows_meta[f"{prefix}table_rows"] = sync.rows
        rows_meta[f"{prefix}decontaminate_records_out"] = expected
        foreign[curated_table_name(namespace)] = foreign_rows(curated_table(catalog, namespace), namespace)
        metadata.update(
            {
                f"{prefix}table": curated_table_name(namespace),
                f"{prefix}snapshot_id": MetadataValue.int(sync.snapshot_id)
                if sync.snapshot_id is not None
                else "none",
                f"{prefix}rows": sync.rows,
                f"{prefix}batches": len(sync.versions),
                f"{prefix}batches_replaced": len(sync.changed),
                f"{prefix}batches_removed": len(sync.removed),
                f"{prefix}rows_written": sync.rows_written,
            }
        )
    version = stable_hash(sorted((ns, sync.data_version) for ns, sync in synced.items()))
    metadata[ROW_COUNT] = sum(sync.rows for sync in synced.values())  # every namespace's table
    return MaterializeResult(
        data_version=DataVersion(version),
        metadata=metadata,
        check_results=[
            AssetCheckResult(
                check_name="rows_match_decontaminate",
                passed=rows_ok,
                metadata=rows_meta,
            ),
            AssetCheckResult(
                check_name="namespace_wall",
                passed=not any(foreign.values()),
                metadata={"rows_of_another_namespace": MetadataValue.json(foreign)},
            ),
        ],
    )


def lance_views_off(context: AssetExecutionContext) -> MaterializeResult | None:
    """The result of a Lance view that ``FM_LANCE_VIEWS=false`` turned off (None while they are on)."""
    if context.resources.pipeline.lance_views:
        return None
    reason = "FM_LANCE_VIEWS=false: the Lance views were not written"
    context.log.info(reason)
    return MaterializeResult(data_version=DataVersion("lance-views-off"), metadata={"skipped": reason})


@asset(
    group_name="release",
    deps=[SOURCE_STAGE, TOKENS_STAGE],
    required_resource_keys={"store", "lance", "pipeline"},
    code_version="documents-lance-v2",
    pool=LANCE_LOCK,
    description="Lance datasets of per-document stats (source, licence, language, quality, chars, tokens, PII "
    "flags), one per namespace: documents.lance (cloud), documents_<namespace>.lance.",
)
def documents_lance(context: AssetExecutionContext) -> MaterializeResult:
    if (off := lance_views_off(context)) is not None:
        return off
    store = context.resources.store.store()
    lance_resource = context.resources.lance
    # the batches' parts are read on the worker pool (their text, for n_chars), the dataset written here
    with spread_over(resolve_workers(context.resources.pipeline.workers)), metered_spread() as spread:
        results = write_documents_lance_namespaces(
            store, lance_resource.documents(), lance_resource.storage_options() or None
        )
    metadata: dict[str, Any] = {
        "spread_tasks": spread.tasks,
        "spread_task_seconds": round(spread.task_seconds, 3),
    }
    for namespace, result in results.items():
        prefix = _prefix(namespace)
        metadata.update(
            {
                f"{prefix}uri": MetadataValue.path(lance_uri(lance_resource.documents(), namespace)),
                f"{prefix}lance_version": result["version"],
                f"{prefix}rows": result["rows"],
                f"{prefix}written": result["written"],
            }
        )
    if list(results) == [DEFAULT_NAMESPACE]:  # only cloud: the version it always had
        version = results[DEFAULT_NAMESPACE]["inputs_version"]
    else:
        version = stable_hash(sorted((ns, r["inputs_version"]) for ns, r in results.items()))
    metadata[ROW_COUNT] = sum(r["rows"] for r in results.values())
    return MaterializeResult(data_version=DataVersion(version), metadata=metadata)


VIEW_ASSETS = [curated_documents, documents_lance]


@asset(
    group_name="release",
    deps=[MEDIA_SHARD_STAGE],
    required_resource_keys={"store", "lance", "pipeline"},
    code_version="media-lance-v2",
    pool=LANCE_LOCK,
    description=(
        "Lance datasets images (with thumbnails), audio and videos (clip thumbnails): one row per sample in"
        " the media shards."
    ),
)
def media_lance(context: AssetExecutionContext) -> MaterializeResult:
    if (off := lance_views_off(context)) is not None:
        return off
    store = context.resources.store.store()
    lance_resource = context.resources.lance
    metadata: dict[str, Any] = {}
    versions = {}
    for namespace in RELEASE_NAMESPACES:
        uris = media_lance_uris(lance_resource.documents(), namespace)
        if namespace != DEFAULT_NAMESPACE and not stage_versions(store, MEDIA_SHARD_STAGE, namespace):
            continue  # no media of that namespace yet: no empty datasets
        result = write_media_lance(store, uris, lance_resource.storage_options() or None, namespace=namespace)
        versions[namespace] = result["inputs_version"]
        prefix = _prefix(namespace)
        metadata[f"{prefix}images_uri"] = MetadataValue.path(uris["image"])
        metadata[f"{prefix}audio_uri"] = MetadataValue.path(uris["audio"])
        metadata[f"{prefix}videos_uri"] = MetadataValue.path(uris["video"])
        metadata[f"{prefix}images"] = result["image"]["rows"]
        metadata[f"{prefix}audio"] = result["audio"]["rows"]
        metadata[ROW_COUNT] = (
            metadata.get(ROW_COUNT, 0)
            + result["image"]["rows"]
            + result["audio"]["rows"]
            + result["video"]["rows"]
        )
        metadata[f"{prefix}videos"] = result["video"]["rows"]
    return MaterializeResult(
        data_version=DataVersion(stable_hash(sorted(versions.items()))), metadata=metadata
    )


VIEW_ASSETS = [*VIEW_ASSETS, media_lance]
