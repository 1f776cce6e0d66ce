"""Jobs: the per-batch preprocessing job (every stage for one partition, plus the tokenizer pin it needs)
and the dataset release job."""

from dagster import AssetSelection, define_asset_job

from fm_assets.defs.partitions import batch_partitions

preprocess_job = define_asset_job(
    "preprocess",
    selection=AssetSelection.groups("preprocess") | AssetSelection.assets("tokenizer"),
    partitions_def=batch_partitions,
    description="Run every preprocessing stage for one landing batch.",
)
release_job = define_asset_job(
    "release", selection=AssetSelection.groups("release"), description="Assemble the dataset version from all batches."
)
