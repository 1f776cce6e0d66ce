"""Builds the Dagster Definitions from one ``Settings``: stage, side-input, release and view assets, jobs,
the landing sensor and the resources of the settings' profile."""

from __future__ import annotations

from dagster import Definitions, ExecutorDefinition, in_process_executor

from fm_assets.defs.conventions import with_conventions
from fm_assets.defs.jobs import preprocess_job, release_job
from fm_assets.defs.release import dataset_release, media_dataset_release
from fm_assets.defs.resources import build_resources
from fm_assets.defs.sensors import landing_batch_sensor, release_after_preprocess
from fm_assets.defs.side_inputs import SIDE_INPUT_ASSETS
from fm_assets.defs.stage_assets import build_stage_asset
from fm_assets.defs.views import VIEW_ASSETS
from fm_assets.settings import Settings, load_settings
from fm_assets.stages.registry import CHAINS, chain_code_version, check_chain

check_chain()
# each chain is one asset group named like the chain (text, media) on the same partitions; both are in the
# preprocess job, and a batch runs only its own chains' assets (jobs.chain_asset_keys)
STAGE_ASSETS = [
    with_conventions(build_stage_asset(stage, chain_code_version(chain), chain), "stage", chain)
    for chain, stages in CHAINS.items()
    for stage in stages
]
SIDE_INPUTS = [with_conventions(a, "side_input") for a in SIDE_INPUT_ASSETS]
RELEASES = [with_conventions(a, "release") for a in (dataset_release, media_dataset_release)]
VIEWS = [with_conventions(a, "view") for a in VIEW_ASSETS]


def build_definitions(settings: Settings | None = None) -> Definitions:
    """Definitions bound to the resources of ``settings`` (default: read from the environment now).

    ``prod`` runs each step as a Kubernetes job (dagster-k8s) and is validated here, at load time;
    ``local`` runs every step of a run inside its run worker (``in_process_executor``): the default
    multiprocess executor would re-import the code location for each step (seconds and ~500 MB each), and
    the stages run one after another anyway. Blocking asset checks still stop the steps downstream.
    """
    settings = settings or load_settings()
    settings.validate_for_profile()
    executor: ExecutorDefinition = in_process_executor
    if settings.profile == "prod":
        from dagster_k8s import k8s_job_executor

        executor = k8s_job_executor
    return Definitions(
        executor=executor,
        assets=[*STAGE_ASSETS, *SIDE_INPUTS, *RELEASES, *VIEWS],
        jobs=[preprocess_job, release_job],
        sensors=[landing_batch_sensor, release_after_preprocess],
        resources=build_resources(settings),
    )
