"""A small real pipeline run (three batches, near-dup off), recorded after each step the views must react to."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fm_assets.cli.runner import dagster_instance, run_batches, run_config
from fm_assets.datasets.views import CURATED_TABLE, recorded_versions
from fm_assets.defs.resources.iceberg import IcebergCatalogResource
from fm_assets.defs.resources.lance import LanceResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import batches_with_ref, read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import load_settings

PACKAGES = ("gnome-user-docs", "debian-handbook")  # the smaller one first: it is processed twice


@dataclass
class ViewState:
    """The Iceberg table and Lance dataset as they stood after one step."""

    snapshot_id: int | None
    snapshots: int
    rows: int
    rows_by_batch: dict[str, int]
    versions: dict[str, str]
    lance_version: int
    lance_rows: int
    lance_fragments: frozenset[int]  # ids of the Lance dataset's data fragments
    decontaminate_records_out: dict[str, int]  # what the table must hold, read from the stage markers
    last_summary: dict[str, str] = field(default_factory=dict)


@dataclass
class ViewsRun:
    root: Path
    store: ObjectStore
    batch_a: str
    batch_b: str
    batch_early: str
    states: dict[str, ViewState]


def view_state(root: Path) -> ViewState:
    import lance

    store = ObjectStore(str(root))
    table = IcebergCatalogResource(root=str(root)).catalog().load_table(CURATED_TABLE)
    snapshot = table.current_snapshot()
    counts = (
        table.scan(selected_fields=("batch",)).to_arrow().group_by("batch").aggregate([("batch", "count")])
    )
    dataset = lance.dataset(LanceResource(root=str(root)).documents())
    return ViewState(
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        snapshots=len(table.snapshots()),
        rows=sum(counts["batch_count"].to_pylist()),
        rows_by_batch=dict(zip(counts["batch"].to_pylist(), counts["batch_count"].to_pylist(), strict=True)),
        versions=recorded_versions(table),
        lance_version=dataset.version,
        lance_rows=dataset.count_rows(),
        lance_fragments=frozenset(fragment.fragment_id for fragment in dataset.get_fragments()),
        decontaminate_records_out={
            batch: read_success(store, "decontaminate", batch).counts.records_out
            for batch in batches_with_ref(store, "decontaminate")
        },
        last_summary=dict(snapshot.summary.additional_properties) if snapshot else {},
    )


def _land(store: ObjectStore, sample: dict[str, Any], package: str) -> str:
    info = sample["packages"][package]
    return land_batch(
        store, Path(sample["dest"]) / package, source=package, license_id=info["license"], namespace="cloud"
    ).batch


def _land_earlier_copy(
    store: ObjectStore, sample: dict[str, Any], package: str, folder: Path, lines: int
) -> str:
    """A batch dated before every other one that repeats ``package``'s first ``lines`` documents (new file bytes)."""
    first_file = sorted((Path(sample["dest"]) / package).glob("*.jsonl"))[0]
    folder.mkdir()
    (folder / "repeat.jsonl").write_text("".join(first_file.read_text().splitlines(keepends=True)[:lines]))
    return land_batch(
        store,
        folder,
        source="mirror",
        license_id=sample["packages"][package]["license"],
        namespace="cloud",
        now=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc),
    ).batch


@pytest.fixture(scope="session")  # shared by the view and notebook tests; env restored on return
def views_run(tmp_path_factory, real_sample, tokenizer_file) -> ViewsRun:
    from fm_assets.defs.build import build_definitions

    missing = [p for p in PACKAGES if p not in real_sample["packages"]]
    if missing:
        pytest.skip(f"sample data lacks {missing} (apt unavailable?)")
    base = tmp_path_factory.mktemp("views")
    root = base / "root"
    (base / "dagster_home").mkdir()
    (base / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with pytest.MonkeyPatch.context() as env:
        for key, value in {
            "FM_ROOT": str(root),
            "DAGSTER_HOME": str(base / "dagster_home"),
            "FM_TOKENIZER_FILE": str(tokenizer_file),
            "FM_SEQ_LEN": "512",
            "FM_LAND_ROWS_PER_PART": "25",
            "FM_ROWS_PER_SHARD": "64",
            "FM_MIN_PACKING_EFFICIENCY": "0.9",
            "FM_NEAR_DEDUP": "0",  # no Spark: the views only need the stages' outputs
            "FM_PROGRESS": "0",
        }.items():
            env.setenv(key, value)
        store = ObjectStore(str(root))
        states: dict[str, ViewState] = {}

        batch_a = _land(store, real_sample, PACKAGES[0])
        assert run_batches(load_settings(), [batch_a]) == {}
        states["first"] = view_state(root)

        # the release job again with nothing new upstream
        result = (
            build_definitions()
            .resolve_job_def("release")
            .execute_in_process(
                instance=dagster_instance(load_settings()),
                raise_on_error=False,
                run_config=run_config(load_settings()),
            )
        )
        assert result.success
        states["rerun"] = view_state(root)

        batch_b = _land(store, real_sample, PACKAGES[1])
        assert run_batches(load_settings(), [batch_b]) == {}
        states["second_batch"] = view_state(root)

        # a batch dated before A repeats some of A's documents: A, re-run after it, loses them to exact dedup,
        # so A's decontaminate data version changes and the table must replace A's rows
        batch_early = _land_earlier_copy(store, real_sample, PACKAGES[0], base / "early", lines=10)
        assert run_batches(load_settings(), [batch_early, batch_a]) == {}
        states["batch_a_changed"] = view_state(root)
    return ViewsRun(root, store, batch_a, batch_b, batch_early, states)
