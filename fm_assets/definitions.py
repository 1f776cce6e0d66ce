"""The Dagster code location: stage assets, release assets, jobs, sensor and resource bindings."""

import os

from dagster import Definitions
from dagster_k8s import k8s_job_executor

from fm_assets.jobs import preprocess_job, release_job
from fm_assets.pipeline import STAGES, check_chain
from fm_assets.release import dataset_release
from fm_assets.resources import build_resources
from fm_assets.sensors import landing_batch_sensor
from fm_assets.stage_asset import build_stage_asset
from fm_assets.views import VIEW_ASSETS

check_chain()
STAGE_ASSETS = [build_stage_asset(stage) for stage in STAGES]


def build_definitions(profile: str | None = None) -> Definitions:
    """Definitions bound to the resources of ``profile`` (read from the environment now).

    ``prod`` runs each step as a Kubernetes job (dagster-k8s); ``local`` keeps Dagster's default executor.
    """
    profile = profile or os.environ.get("FM_PROFILE", "local")
    return Definitions(
        executor=k8s_job_executor if profile == "prod" else None,
        assets=[*STAGE_ASSETS, dataset_release, *VIEW_ASSETS],
        jobs=[preprocess_job, release_job],
        sensors=[landing_batch_sensor],
        resources=build_resources(profile),
    )


defs = build_definitions()
