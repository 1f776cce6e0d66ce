"""Runs the preprocessing job for landing batches through Dagster in-process (same job as UI and sensor)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from dagster import AssetKey, DagsterInstance
from rich.console import Console

from fm_assets.cli.head_start import warm_unit_workers
from fm_assets.cli.pipes import err
from fm_assets.cli.progress_view import progress_view
from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME
from fm_assets.engine import progress
from fm_assets.engine.background_imports import import_in_background
from fm_assets.engine.landing import list_complete_batches
from fm_assets.engine.pool import pace_with_driver, when_driver_waits
from fm_assets.settings import Settings


def dagster_instance(settings: Settings) -> DagsterInstance:
    """The persistent instance in ``settings.instance_home`` (``$DAGSTER_HOME`` or ``<root>/dagster_home``),
    shared with ``dagster dev`` and the daemon: the same config whichever command runs first (issue 19)."""
    from fm_assets.defs.cli_runs import reclaim_dead_cli_runs
    from fm_assets.defs.instance import install_instance_config

    home = install_instance_config(settings.instance_home).parent
    instance = DagsterInstance.from_config(str(home))  # opened once: this creates the storage on a new home
    reclaim_dead_cli_runs(instance)  # runs of a killed `fm run`: failed, their pool slots freed
    return instance


def run_config(settings: Settings) -> dict[str, Any]:
    # Dagster's per-event console log drowns the progress bar; the event log in the instance keeps everything.
    return {"loggers": {"console": {"config": {"log_level": settings.dagster_log_level}}}}


class UnknownBatchError(ValueError):
    pass


def _failure_message(result: Any) -> str:
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            error = getattr(event.event_specific_data, "error", None)
            while error is not None and error.cause is not None:  # the root cause, not Dagster's wrapper
                error = error.cause
            if error is not None:
                return f"{event.step_key}: {error.message.strip()}"
    return "run failed (see the Dagster event log)"


def run_batches(
    settings: Settings,
    batches: list[str] | None = None,
    *,
    release: bool = True,
    console: Console | None = None,
) -> dict[str, str]:
    """Materialize every stage for ``batches`` (default: all complete ones); returns {batch: error} for failures."""
    from fm_assets.datasets.views import VIEW_LIBRARIES, VIEW_LIBRARIES_FIRST
    from fm_assets.defs.build import build_definitions
    from fm_assets.defs.cli_runs import cli_run_tags
    from fm_assets.defs.jobs import chain_asset_keys, release_asset_keys
    from fm_assets.stages.batch_chains import batch_chains
    from fm_assets.stages.names import ALL_STAGE_NAMES
    from fm_assets.stages.tokenize import STAGE as TOKENIZE_STAGE
    from fm_assets.stages.tokenize import choose_encoder_in_background

    console = console or err
    defs = build_definitions(settings)
    store = (defs.resources or {})["store"].store()
    landed = list_complete_batches(store)
    wanted = batches or landed
    unknown = [b for b in wanted if b not in landed]
    if unknown:
        raise UnknownBatchError(f"not complete landing batches: {unknown}; see `ls {store.uri('landing')}`")
    # issue 19: each batch runs only its own chains' steps (as the landing sensor requests them)
    selections = {batch: chain_asset_keys(batch_chains(store, batch)) for batch in wanted}
    # a no-op after `fm run`'s own call (cli/head_start.py); for a caller of this function, the fork server
    # imports its modules on another core while this process opens the instance and sets up the run
    warm_unit_workers(settings, store, wanted)
    instance = dagster_instance(settings)
    known = set(instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME))
    new = [b for b in wanted if b not in known]
    if new:
        instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, new)

    job = defs.resolve_job_def("preprocess")
    failures: dict[str, str] = {}
    # the release's libraries load, and tokenize's encoder is chosen, while the preprocess run's driver waits
    # on its unit workers
    overlap = ExitStack()
    if release:
        overlap.enter_context(
            when_driver_waits(
                lambda: import_in_background(VIEW_LIBRARIES, VIEW_LIBRARIES_FIRST, pace=pace_with_driver)
            )
        )
    if any(AssetKey(TOKENIZE_STAGE.name) in keys for keys in selections.values()):
        overlap.enter_context(
            when_driver_waits(lambda: choose_encoder_in_background(store, pace=pace_with_driver))
        )
    steps = sum(
        len([k for k in keys if k.to_user_string() in ALL_STAGE_NAMES]) for keys in selections.values()
    )
    with overlap, progress_view(console, steps) as bar:

        def on_event(event: str, stage: str, batch: str, info: dict[str, Any]) -> None:
            if event == "start":
                bar.describe(f"{batch} · {stage}")
            elif event == "wait":  # a cross-batch wait: say what for, every retry
                console.print(
                    f"[yellow]{stage}[{batch}]: {info.get('message', 'waiting')}[/yellow]", highlight=False
                )
            else:
                bar.advance()

        progress.add_listener(on_event)
        try:
            for batch in sorted(
                wanted
            ):  # id order: an earlier batch is never left waiting behind a later one
                result = job.execute_in_process(
                    partition_key=batch,
                    asset_selection=selections[batch],
                    instance=instance,
                    raise_on_error=False,
                    run_config=run_config(settings),
                    tags=cli_run_tags(),  # issue 19: which process runs it (see defs/cli_runs.py)
                )
                if not result.success:
                    failures[batch] = _failure_message(result)
            # a failed batch is held back by the release itself (datasets/release.py), never the other batches:
            # the release runs unless no landed batch came through this run
            released = release_asset_keys(defs, set().union(*selections.values()))
            if release and released and set(landed) - set(failures):
                bar.describe("dataset release")
                result = defs.resolve_job_def("release").execute_in_process(
                    instance=instance,
                    asset_selection=released,
                    raise_on_error=False,
                    run_config=run_config(settings),
                    tags=cli_run_tags(),  # issue 19: which process runs it (see defs/cli_runs.py)
                )
                if not result.success:
                    failures["<release>"] = _failure_message(result)
        finally:
            progress.remove_listener(on_event)
    return failures
