"""The Dagster conventions every asset of the code location keeps, applied in one place (``build``):

* an owner (``OWNER``), so the catalog says who answers for it;
* tags ``fm/layer`` (``stage``, ``side_input``, ``release``, ``view``) and, for stage assets, ``fm/chain``
  (``text`` or ``media``: the chain names are the asset group names);
* kinds naming where it computes (``python``, ``spark``) and what it writes (``parquet`` stage outputs,
  ``iceberg`` and ``lance`` views, ``webdataset`` releases, ``json`` side inputs);
* the standard metadata keys: ``dagster/column_schema`` on every stage asset (its output schema) and
  ``dagster/row_count`` on each materialization (``stage_assets``, ``release``, ``views``).
"""

from __future__ import annotations

import pyarrow as pa
from dagster import AssetsDefinition, AssetSpec, TableColumn, TableSchema

OWNER = "team:data-platform"
LAYER_TAG = "fm/layer"
CHAIN_TAG = "fm/chain"
ROW_COUNT = "dagster/row_count"
COLUMN_SCHEMA = "dagster/column_schema"

# what each non-stage asset writes (stage outputs are parquet)
STORAGE_KINDS: dict[str, set[str]] = {
    "curated_documents": {"iceberg"},
    "documents_lance": {"lance"},
    "media_lance": {"lance"},
    "dataset_release": {"webdataset", "json"},
    "media_dataset_release": {"webdataset", "json"},
    "tokenizer": {"json"},
    "quality_model": {"json"},
}


def table_schema(schema: pa.Schema) -> TableSchema:
    """A pyarrow schema as Dagster's column schema (name and Arrow type per column)."""
    return TableSchema(columns=[TableColumn(field.name, str(field.type)) for field in schema])


def with_conventions(assets: AssetsDefinition, layer: str, chain: str | None = None) -> AssetsDefinition:
    """``assets`` with the owner, layer/chain tags and storage kinds added to each of its specs."""

    def conventional(spec: AssetSpec) -> AssetSpec:
        tags = {LAYER_TAG: layer, **({CHAIN_TAG: chain} if chain else {})}
        kinds = STORAGE_KINDS.get(spec.key.to_user_string(), {"parquet"} if layer == "stage" else set())
        if not spec.kinds:
            kinds = kinds | {"python"}
        return spec.merge_attributes(owners=[OWNER], tags=tags, kinds=kinds)

    return assets.map_asset_specs(conventional)
