"""The Dagster resources and their bindings per profile, in one place: ``local`` (one machine, embedded
engines) and ``prod``.

The modules of this package are the ``ConfigurableResource``s, thin Dagster handles on the engine and the
side inputs (object store, pipeline settings, tokenizer spec, blocklists, eval registry, quality model) and
on Spark, Iceberg and Lance. ``build_resources`` binds them from one ``Settings`` object; the profiles differ
in executor and defaults (Spark master, catalog), not in code.
"""

from __future__ import annotations

from typing import Any

from fm_assets.defs.resources.iceberg import IcebergCatalogResource, local_state_catalog_uri
from fm_assets.defs.resources.lance import LanceResource
from fm_assets.defs.resources.object_store import ObjectStoreResource
from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.defs.resources.side_inputs import (
    BlocklistsResource,
    EvalRegistryResource,
    QualityModelResource,
)
from fm_assets.defs.resources.spark import SparkResource
from fm_assets.defs.resources.tokenizer_registry import TokenizerRegistryResource
from fm_assets.settings import Settings


def build_resources(settings: Settings) -> dict[str, Any]:
    iceberg_uri = settings.iceberg_uri
    if iceberg_uri is None and settings.profile == "local":
        iceberg_uri = local_state_catalog_uri(settings.root, settings.instance_home)
    return {
        "store": ObjectStoreResource(
            root=settings.root, s3_endpoint_url=settings.s3_endpoint_url, s3_region=settings.s3_region
        ),
        "pipeline": PipelineConfigResource(**settings.pipeline().model_dump()),
        "tokenizers": TokenizerRegistryResource(
            tokenizer_file=settings.tokenizer_file,
            train_vocab_size=settings.tokenizer_vocab_size,
            train_sample_docs=settings.tokenizer_train_docs,
        ),
        "blocklists": BlocklistsResource(path=settings.blocklist_file),
        "eval_registry": EvalRegistryResource(
            path=settings.eval_registry_file, benchmarks=settings.eval_benchmarks
        ),
        "quality_model_source": QualityModelResource(
            model_file=settings.quality_model_file, train_dir=settings.quality_train_dir
        ),
        "spark": SparkResource(
            master=settings.resolved_spark_master,
            log_level=settings.spark_log_level,
            extra_conf=settings.spark_conf,
        ),
        "iceberg": IcebergCatalogResource(
            root=settings.root,
            catalog_type=settings.iceberg_catalog_type,
            uri=iceberg_uri,
            s3_endpoint_url=settings.s3_endpoint_url,
            s3_region=settings.s3_region,
        ),
        "lance": LanceResource(
            root=settings.root, s3_endpoint_url=settings.s3_endpoint_url, s3_region=settings.s3_region
        ),
    }
