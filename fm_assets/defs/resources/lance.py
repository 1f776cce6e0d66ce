"""Lance resource: where the per-document analytical view lives (default ``<FM_ROOT>/lance/documents.lance``).

Lance reads and writes local paths and ``s3://`` URIs natively; for an S3-compatible endpoint
(MinIO, moto) the endpoint goes into ``storage_options``.
"""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

DOCUMENTS_DATASET = "lance/documents.lance"


def documents_uri(root: str) -> str:
    """The default documents dataset location under ``root`` (absolute for local roots)."""
    if "://" not in root or root.startswith("file://"):
        return str(Path(root.removeprefix("file://")).expanduser().resolve() / DOCUMENTS_DATASET)
    return f"{root.rstrip('/')}/{DOCUMENTS_DATASET}"


class LanceResource(ConfigurableResource):
    """The Lance documents dataset: its URI and the storage options Lance needs to reach it."""

    root: str = Field(description="The storage root: derives the default dataset URI")
    documents_uri: str | None = Field(default=None, description="Override: where documents.lance lives")
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint for s3:// URIs")
    s3_region: str | None = Field(default=None, description="Region for s3:// URIs")

    def documents(self) -> str:
        return self.documents_uri or documents_uri(self.root)

    def storage_options(self) -> dict[str, str]:
        endpoint = self.s3_endpoint_url
        if not self.documents().startswith("s3://") or not endpoint:
            return {}
        options = {"aws_endpoint": endpoint, "allow_http": str(endpoint.startswith("http://")).lower()}
        if self.s3_region:
            options["aws_region"] = self.s3_region
        return options
