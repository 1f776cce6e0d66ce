"""Iceberg catalog resource: a SQLite ``SqlCatalog`` under ``FM_ROOT`` locally, any pyiceberg catalog in production.

Local roots get ``sqlite:///<root>/catalog/iceberg.db`` and warehouse ``<root>/warehouse`` with no
configuration. Production switches by configuration only, for example a REST catalog::

    IcebergCatalogResource(catalog_type="rest", uri="https://catalog.example/api",
                           properties={"warehouse": "s3://bucket/warehouse", "token": "..."})

or AWS Glue (``catalog_type="glue"``, ``properties={"glue.region": "eu-west-1"}``). ``properties`` are
passed to :func:`pyiceberg.catalog.load_catalog` unchanged (see pyiceberg's catalog docs for the keys).
For an ``s3://`` root with the default SQL catalog the warehouse is ``<root>/warehouse`` but the
catalog ``uri`` (a SQLAlchemy URL, e.g. Postgres) must be given: SQLite cannot live in S3. The local
profile (``fm_assets.defs.resources``) fills it with a SQLite file in ``$DAGSTER_HOME`` for a single-machine run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster import ConfigurableResource
from pydantic import Field

if TYPE_CHECKING:  # pyiceberg is imported when a catalog is opened, not with the code location
    from pyiceberg.catalog import Catalog

NAMESPACE = "fm"


class IcebergConfigError(ValueError):
    """The catalog cannot be built from the given settings."""


def _is_local(root: str) -> bool:
    return "://" not in root or root.startswith("file://")


def local_state_catalog_uri(root: str, home: Path) -> str | None:
    """For the local profile with a remote root: a SQLite catalog beside the Dagster instance (one machine only).

    Returns None for local roots (their catalog lives under the root itself).
    """
    if _is_local(root):
        return None
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{home / 'iceberg_catalog.db'}"


def catalog_properties(
    root: str,
    catalog_type: str = "sql",
    uri: str | None = None,
    warehouse: str | None = None,
    properties: dict[str, str] | None = None,
    s3_endpoint_url: str | None = None,
    s3_region: str | None = None,
) -> dict[str, str]:
    """The ``load_catalog`` properties for these settings (defaults derived from ``root``)."""
    props: dict[str, str] = {"type": catalog_type}
    local = _is_local(root)
    local_root = Path(root.removeprefix("file://")).expanduser().resolve() if local else None
    if warehouse is None:
        warehouse = (
            local_root.joinpath("warehouse").as_uri() if local_root else f"{root.rstrip('/')}/warehouse"
        )
    if catalog_type == "sql" and uri is None:
        if local_root is None:
            raise IcebergConfigError(
                f"FM_ROOT={root} is not local: give the SQL catalog a database uri (e.g. postgresql+psycopg2://...) "
                "or use catalog_type='rest'/'glue' (FM_ICEBERG_URI / FM_ICEBERG_CATALOG_TYPE)"
            )
        (local_root / "catalog").mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{local_root / 'catalog' / 'iceberg.db'}"
    if local_root is not None:
        Path(warehouse.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    props["warehouse"] = warehouse
    if uri is not None:
        props["uri"] = uri
    if s3_endpoint_url and warehouse.startswith("s3://"):
        props["s3.endpoint"] = s3_endpoint_url
        if s3_region:
            props["s3.region"] = s3_region
    props.update(properties or {})
    return props


class IcebergCatalogResource(ConfigurableResource):
    """Where Iceberg tables are registered (``catalog()``) and where their files live (the warehouse)."""

    root: str = Field(description="The storage root: derives the default catalog and warehouse")
    catalog_name: str = Field(default="fm", description="Name pyiceberg gives the catalog")
    catalog_type: str = Field(default="sql", description="pyiceberg catalog type: sql, rest, glue, hive, ...")
    uri: str | None = Field(
        default=None, description="Catalog URI; default sqlite:///<root>/catalog/iceberg.db"
    )
    warehouse: str | None = Field(default=None, description="Warehouse location; default <root>/warehouse")
    properties: dict[str, str] = Field(default_factory=dict, description="Extra load_catalog properties")
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint for the warehouse")
    s3_region: str | None = Field(default=None, description="Region of the warehouse bucket")

    def catalog(self) -> Catalog:
        props = catalog_properties(
            self.root,
            self.catalog_type,
            self.uri,
            self.warehouse,
            self.properties,
            self.s3_endpoint_url,
            self.s3_region,
        )
        from pyiceberg.catalog import load_catalog

        catalog = load_catalog(self.catalog_name, **props)
        catalog.create_namespace_if_not_exists(NAMESPACE)
        return catalog

    def describe(self) -> dict[str, Any]:
        """The catalog settings without secrets (for metadata and logs)."""
        return {
            "type": self.catalog_type,
            "name": self.catalog_name,
            "warehouse": self.warehouse or "<root>/warehouse",
        }
