"""Dagster resource for the object store: where all platform data lives (a local folder or S3)."""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from fm_assets.engine.store import ObjectStore


class ObjectStoreResource(ConfigurableResource):
    """Where all platform data lives: a local folder or s3://bucket/prefix (``Settings.root``)."""

    root: str = Field(description="Local folder or s3://bucket/prefix")
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint (MinIO, moto, ...)")
    s3_region: str | None = None

    def store(self) -> ObjectStore:
        options: dict[str, Any] = {}
        if self.root.startswith("s3://"):
            client_kwargs: dict[str, Any] = {}
            if self.s3_endpoint_url:
                client_kwargs["endpoint_url"] = self.s3_endpoint_url
            if self.s3_region:
                client_kwargs["region_name"] = self.s3_region
            options = {"client_kwargs": client_kwargs, "skip_instance_cache": True}
        return ObjectStore(self.root, options)
