"""Resource bindings per environment profile (``FM_PROFILE``: local by default, or prod)."""

from __future__ import annotations

import os
from typing import Any

from fm_resources.iceberg import IcebergCatalogResource, local_state_catalog_uri
from fm_resources.lance import LanceResource
from fm_resources.object_store import ObjectStoreResource, default_root
from fm_resources.pipeline_config import PipelineConfigResource
from fm_resources.spark import SparkResource
from fm_resources.tokenizer_registry import TokenizerRegistryResource


def build_resources(profile: str | None = None) -> dict[str, Any]:
    profile = profile or os.environ.get("FM_PROFILE", "local")
    if profile not in ("local", "prod"):
        raise ValueError(f"FM_PROFILE={profile!r} is unknown; use 'local' or 'prod'")
    env = os.environ
    return {
        "store": ObjectStoreResource(root=default_root(), s3_endpoint_url=env.get("FM_S3_ENDPOINT_URL")),
        "pipeline": PipelineConfigResource(
            seq_len=int(env.get("FM_SEQ_LEN", 2048)),
            land_rows_per_part=int(env.get("FM_LAND_ROWS_PER_PART", 5000)),
            rows_per_shard=int(env.get("FM_ROWS_PER_SHARD", 1024)),
            blocklist_file=env.get("FM_BLOCKLIST_FILE"),
            progress=env.get("FM_PROGRESS", "1") != "0",
            near_dedup=env.get("FM_NEAR_DEDUP", "1") != "0",
            min_packing_efficiency=float(env.get("FM_MIN_PACKING_EFFICIENCY", 0.98)),
            verify_committed_units=env.get("FM_VERIFY_COMMITTED_UNITS", "0") == "1",
        ),
        "tokenizers": TokenizerRegistryResource(tokenizer_file=env.get("FM_TOKENIZER_FILE")),
        "spark": SparkResource(master=env.get("FM_SPARK_MASTER", "local[2]" if profile == "local" else "local[*]")),
        "iceberg": IcebergCatalogResource(
            root=default_root(),
            catalog_type=env.get("FM_ICEBERG_CATALOG_TYPE", "sql"),
            uri=env.get("FM_ICEBERG_URI") or (local_state_catalog_uri(default_root()) if profile == "local" else None),
        ),
        "lance": LanceResource(root=default_root()),
    }
