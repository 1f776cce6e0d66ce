"""The Dagster UI as users drive it: ``dagster dev`` (what ``make ui`` runs) and headless Chromium through
Playwright. The asset graph shows the stages, a two-partition backfill launched from the materialize dialog
runs to success, and the dedup asset's Checks tab shows the accounting check passed for each partition.

Screenshots of every step go to ``<tmp>/screenshots`` (and to tests/ui/screenshots when
FM_SAVE_SCREENSHOTS=1). Needs Debian's chromium (/usr/bin/chromium) and the playwright package; it never
downloads Playwright's own browsers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from browser import UI_TIMEOUT_MS, Screenshots
from dagster import DagsterRunStatus
from dagster._core.execution.backfill import BulkActionStatus
from dagster_stack import DagsterStack

from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import ALL_STAGE_NAMES, CHAIN_NAMES

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(3000)]
BACKFILL_DONE = {
    BulkActionStatus.COMPLETED_SUCCESS,
    BulkActionStatus.COMPLETED_FAILED,
    BulkActionStatus.COMPLETED,
    BulkActionStatus.FAILED,
    BulkActionStatus.CANCELED,
}


def backfill_failures(stack: DagsterStack, backfill_id: str) -> str:
    failed = [
        run
        for run in stack.runs(tags={"dagster/backfill": backfill_id})
        if run.status != DagsterRunStatus.SUCCESS
    ]
    return (
        "\n".join(f"run {run.run_id}: {stack.failure_message(run.run_id)}" for run in failed)
        or "(no failed runs)"
    )


def test_asset_graph_backfill_and_partitioned_checks_in_the_ui(
    dagster_stack: DagsterStack,
    sample_files: list[tuple[Path, str, str]],
    browser_page: Any,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=UI_TIMEOUT_MS)
    stack, page = dagster_stack, browser_page
    shots = Screenshots(tmp_path / "screenshots")

    # two small batches of real documents, registered as partitions the way `fm run` registers them: the
    # landing sensor treats them as known and launches nothing, so the backfill is the UI's doing
    store = ObjectStore(str(stack.root))
    batches = sorted(
        land_batch(store, path, source=source, license_id=licence, namespace="cloud").batch
        for path, source, licence in sample_files[:2]
    )
    stack.instance.add_dynamic_partitions(BATCH_PARTITIONS_NAME, batches)

    stack.start_dev()
    stack.wait_for_webserver()
    stack.wait_for_daemons()
    (location,) = [
        e["name"]
        for e in stack.graphql("{ workspaceOrError { ... on Workspace { locationEntries { name } } } }")[
            "workspaceOrError"
        ]["locationEntries"]
    ]

    # 1. the asset graph of the text group (the text chain) shows every stage
    page.goto(f"{stack.url}/locations/{location}/asset-groups/text/lineage")
    for stage in CHAIN_NAMES["text"]:
        expect(page.get_by_text(stage, exact=True).first).to_be_visible()
    shots.take(page, "asset-graph")

    # 2. the preprocess job's "Materialize all" dialog, two partitions picked one by one; the job holds both
    # chains' stages plus the tokenizer and quality_model side-input assets
    job_assets = len(ALL_STAGE_NAMES) + 2
    page.goto(f"{stack.url}/locations/{location}/jobs/preprocess")
    page.get_by_role("button", name="Materialize all").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text(f"Launch runs to materialize {job_assets} assets")).to_be_visible()
    dialog.get_by_text("Select a partition or create one").click()
    for batch in batches:
        page.get_by_text(batch, exact=True).first.click()
    dialog.get_by_text(
        f"Launch runs to materialize {job_assets} assets"
    ).click()  # closes the picker, keeps the dialog
    expect(page.get_by_placeholder("Filter partitions")).to_be_hidden()
    expect(dialog.get_by_text("2 partitions", exact=True)).to_be_visible()
    shots.take(page, "backfill-dialog")
    assert stack.instance.get_backfills() == []
    dialog.get_by_role("button", name="Launch backfill").click()
    expect(page.get_by_role("dialog")).to_have_count(0)

    backfills = stack.wait_for("the backfill the UI created", stack.instance.get_backfills, timeout=120)
    assert len(backfills) == 1
    backfill = backfills[0]
    expect(page.get_by_text(f"Created backfill {backfill.backfill_id}")).to_be_visible()
    page.wait_for_timeout(1500)  # the toast fades in
    shots.take(page, "backfill-launched")
    # a backfill of the preprocess job: one run per picked partition, each materializing the job's assets
    assert backfill.tags.get("dagster/from_ui") == "true"
    assert backfill.partition_set_origin is not None
    assert backfill.partition_set_origin.partition_set_name == "preprocess_partition_set"
    assert sorted(backfill.partition_names or []) == batches
    assert len(backfill.asset_selection or []) == job_assets

    # 3. the backfill runs to success (the daemon launches its runs through the queue)
    done = stack.wait_for(
        f"backfill {backfill.backfill_id} to finish",
        lambda: (
            (b := stack.instance.get_backfill(backfill.backfill_id)) is not None
            and b.status in BACKFILL_DONE
            and b
        ),
        timeout=2400,
        interval=10,
    )
    assert done.status == BulkActionStatus.COMPLETED_SUCCESS, (
        f"backfill ended {done.status}: {backfill_failures(stack, backfill.backfill_id)}\n{stack.log_tails()}"
    )
    runs = stack.runs(tags={"dagster/backfill": backfill.backfill_id})
    assert sorted(run.tags["dagster/partition"] for run in runs) == batches
    assert all(run.status == DagsterRunStatus.SUCCESS and run.job_name == "preprocess" for run in runs)
    assert not stack.runs(tags={"dagster/sensor_name": "landing_batch_sensor"})

    page.goto(f"{stack.url}/runs/b/{backfill.backfill_id}")
    expect(page.get_by_text("Succeeded", exact=True).first).to_be_visible()
    expect(page.get_by_text("2 partitions", exact=True)).to_be_visible()
    page.get_by_role("tab", name="Runs").click()
    for batch in batches:
        expect(page.get_by_text(f"partition: {batch}", exact=True)).to_be_visible()
    expect(page.get_by_text("Success", exact=True)).to_have_count(2)
    shots.take(page, "backfill-completed")

    # 4. dedup's accounting check, evaluated per partition, in the Checks tab
    page.goto(f"{stack.url}/assets/dedup?view=checks")
    expect(page.get_by_text("accounting", exact=True).first).to_be_visible()
    page.get_by_text("Execution history", exact=True).click()
    for batch in batches:
        expect(page.get_by_role("cell", name=batch, exact=True)).to_be_visible()
    expect(page.get_by_role("cell", name="Passed")).to_have_count(2)
    shots.take(page, "dedup-accounting-history")
    page.get_by_text("Partitions", exact=True).last.click()
    expect(page.get_by_text("Passed (2)", exact=True)).to_be_visible()
    expect(page.get_by_text("Failed (0)", exact=True)).to_be_visible()
    shots.take(page, "dedup-accounting-partitions")

    assert [p.name for p in shots.taken] == [
        "01-asset-graph.png",
        "02-backfill-dialog.png",
        "03-backfill-launched.png",
        "04-backfill-completed.png",
        "05-dedup-accounting-history.png",
        "06-dedup-accounting-partitions.png",
    ]
