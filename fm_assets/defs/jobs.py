"""Jobs: the per-batch preprocessing job (every stage of the text and media chains for one partition, plus the
tokenizer pin they need)
and the dataset release job, whose runs carry a tag the run queue limits to one at a time."""

from dagster import AssetSelection, define_asset_job

from fm_assets.defs.partitions import batch_partitions

# deploy/local/dagster.yaml (and a prod instance) limits runs with this tag to one at a time: two releases
# at once could race on LATEST.json and on Iceberg commits
RELEASE_RUN_TAG_KEY = "fm/run_group"
RELEASE_RUN_TAG_VALUE = "release"

preprocess_job = define_asset_job(
    "preprocess",
    selection=AssetSelection.groups("preprocess", "multimodal")
    | AssetSelection.assets("tokenizer", "quality_model"),
    partitions_def=batch_partitions,
    description="Run every preprocessing stage of both chains (text, multimodal) for one landing batch.",
)
release_job = define_asset_job(
    "release",
    selection=AssetSelection.groups("release"),
    run_tags={RELEASE_RUN_TAG_KEY: RELEASE_RUN_TAG_VALUE},
    description="Assemble the dataset version from all batches (one release run at a time).",
)
