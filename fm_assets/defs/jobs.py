"""Jobs: the per-batch preprocessing job (every stage of the text and media chains for one partition, plus the
tokenizer pin they need)
and the dataset release job, whose runs carry a tag the run queue limits to one at a time."""

from collections.abc import Iterable

from dagster import AssetKey, AssetSelection, Definitions, define_asset_job

from fm_assets.defs.partitions import batch_partitions
from fm_assets.stages.registry import CHAINS

# side-input assets the preprocess job materializes (the others are observable sources outside any job)
JOB_SIDE_INPUTS = ("tokenizer", "quality_model")

# deploy/local/dagster.yaml (and a prod instance) limits runs with this tag to one at a time: two releases
# at once could race on LATEST.json and on Iceberg commits
RELEASE_RUN_TAG_KEY = "fm/run_group"
RELEASE_RUN_TAG_VALUE = "release"

preprocess_job = define_asset_job(
    "preprocess",
    selection=AssetSelection.groups(*CHAINS)  # the chain groups: text, media
    | AssetSelection.assets("tokenizer", "quality_model"),
    partitions_def=batch_partitions,
    description="Run the preprocessing stages of a landing batch's chains (text, media; the sensor and `fm run` "
    "select the batch's own chains).",
)
release_job = define_asset_job(
    "release",
    selection=AssetSelection.groups("release"),
    run_tags={RELEASE_RUN_TAG_KEY: RELEASE_RUN_TAG_VALUE},
    description="Assemble the dataset version from all batches (one release run at a time).",
)


def release_asset_keys(defs: Definitions, ran: Iterable[AssetKey]) -> list[AssetKey]:
    """The release job's assets that read any of ``ran`` (a run's preprocess assets): `fm run` of text batches
    releases text, not media, whose inputs it did not change (the sensor's release runs the whole job)."""
    selection = AssetSelection.groups("release") & AssetSelection.assets(*ran).downstream(depth=1)
    return sorted(selection.resolve(defs.resolve_asset_graph()), key=lambda key: key.to_user_string())


def chain_asset_keys(chains: Iterable[str]) -> list[AssetKey]:
    """The preprocess job's assets a batch of ``chains`` runs (``stages.batch_chains``): the stages of those
    chains and the side inputs they read, so a text batch runs no media step and a media batch no text step
    (the sensor's run requests and `fm run` select these)."""
    names: list[str] = []
    for chain in chains:
        for stage in CHAINS[chain]:
            names += [a for a in stage.side_input_assets if a in JOB_SIDE_INPUTS and a not in names]
            names.append(stage.name)
    return [AssetKey(name) for name in names]
