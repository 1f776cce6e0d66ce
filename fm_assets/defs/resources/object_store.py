"""Dagster resource for the object store: where all platform data lives (a local folder or S3)."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from fm_assets.engine.store import ObjectStore, open_store


class ObjectStoreResource(ConfigurableResource):
    """Where all platform data lives: a local folder or s3://bucket/prefix (``Settings.root``)."""

    root: str = Field(description="Local folder or s3://bucket/prefix")
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint (MinIO, moto, ...)")
    s3_region: str | None = None

    def store(self) -> ObjectStore:
        return open_store(self.root, self.s3_endpoint_url, self.s3_region)
