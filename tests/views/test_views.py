"""The Iceberg and Lance views against a real pipeline run: counts, idempotence, incremental batches, replacement."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster import AssetCheckKey, AssetKey, DagsterInstance
from pyiceberg.expressions import EqualTo

from fm_assets.datasets.views import CURATED_TABLE
from fm_assets.defs.resources.iceberg import IcebergCatalogResource
from fm_assets.defs.resources.lance import LanceResource
from fm_assets.engine.refs import read_ref, read_success

pytestmark = [pytest.mark.slow]


def tokens_by_doc(run, batch: str) -> dict[str, int]:
    found = {}
    for part in read_success(run.store, "tokenize", batch).parts:
        table = pq.read_table(run.store.local_path(part), columns=["doc_id", "n_tokens"])
        found.update(zip(table["doc_id"].to_pylist(), table["n_tokens"].to_pylist(), strict=True))
    return found


def test_first_batch_rows_equal_decontaminate_output(views_run):
    first = views_run.states["first"]
    expected = first.decontaminate_records_out[views_run.batch_a]
    assert expected > 0
    assert first.rows == expected
    assert first.rows_by_batch == {views_run.batch_a: expected}
    assert first.snapshots == 1
    assert first.versions == {views_run.batch_a: first.versions[views_run.batch_a]}
    assert first.lance_rows == expected


def test_rematerializing_without_change_makes_no_snapshot_or_lance_version(views_run):
    first, rerun = views_run.states["first"], views_run.states["rerun"]
    assert rerun.snapshot_id == first.snapshot_id
    assert rerun.snapshots == first.snapshots
    assert rerun.lance_version == first.lance_version


def test_new_batch_adds_exactly_its_rows_in_one_snapshot(views_run):
    before, after = views_run.states["rerun"], views_run.states["second_batch"]
    added = after.decontaminate_records_out[views_run.batch_b]
    assert added > 0
    assert after.snapshots == before.snapshots + 1
    assert after.rows == before.rows + added
    assert after.rows_by_batch[views_run.batch_a] == before.rows_by_batch[views_run.batch_a]
    assert after.rows_by_batch[views_run.batch_b] == added
    assert after.last_summary["fm.batches-changed"] == views_run.batch_b
    assert after.lance_version > before.lance_version
    assert after.lance_rows == after.rows
    # the Lance view appended batch B's rows: batch A's fragments are kept, not rewritten
    assert before.lance_fragments < after.lance_fragments


def test_changed_batch_is_replaced_not_duplicated(views_run):
    before, after = views_run.states["second_batch"], views_run.states["batch_a_changed"]
    a, b, early = views_run.batch_a, views_run.batch_b, views_run.batch_early
    new_version = read_ref(views_run.store, "decontaminate", a).data_version
    assert before.versions[a] != new_version  # the setup really changed batch A's data version
    assert after.versions[a] == new_version
    assert after.versions[b] == before.versions[b]
    assert after.snapshots == before.snapshots + 1  # A replaced and the early batch added: one snapshot
    assert set(after.last_summary["fm.batches-changed"].split(",")) == {a, early}
    assert after.rows_by_batch == after.decontaminate_records_out
    assert set(after.rows_by_batch) == {a, b, early}
    assert after.rows_by_batch[a] < before.rows_by_batch[a]  # A's repeated documents left the table
    assert after.rows == sum(after.rows_by_batch.values())


def test_table_content_matches_decontaminate_parts(views_run):
    table = IcebergCatalogResource(root=str(views_run.root)).catalog().load_table(CURATED_TABLE)
    for batch in (views_run.batch_a, views_run.batch_b, views_run.batch_early):
        stored = table.scan(
            row_filter=EqualTo("batch", batch), selected_fields=("doc_id", "text", "n_chars")
        ).to_arrow()
        parts = [
            pq.read_table(views_run.store.local_path(p))
            for p in read_success(views_run.store, "decontaminate", batch).parts
        ]
        source = {
            doc: text
            for part in parts
            for doc, text in zip(part["doc_id"].to_pylist(), part["text"].to_pylist(), strict=True)
        }
        assert dict(zip(stored["doc_id"].to_pylist(), stored["text"].to_pylist(), strict=True)) == source
        assert stored["n_chars"].to_pylist() == pc.utf8_length(stored["text"]).to_pylist()


def test_lance_token_counts_join_tokenize_output(views_run):
    import lance

    view = lance.dataset(LanceResource(root=str(views_run.root)).documents()).to_table()
    assert view.num_rows == views_run.states["batch_a_changed"].rows
    expected = {}
    for batch in (views_run.batch_a, views_run.batch_b, views_run.batch_early):
        expected.update(tokens_by_doc(views_run, batch))
    assert dict(zip(view["doc_id"].to_pylist(), view["n_tokens"].to_pylist(), strict=True)) == expected


def test_dagster_records_snapshot_and_passing_row_check(views_run, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(views_run.root.parent / "dagster_home"))
    instance = DagsterInstance.get()
    event = instance.get_latest_materialization_event(AssetKey("curated_documents"))
    assert event is not None
    metadata = event.asset_materialization.metadata
    assert metadata["snapshot_id"].value == views_run.states["batch_a_changed"].snapshot_id
    assert metadata["rows"].value == views_run.states["batch_a_changed"].rows
    lance_event = instance.get_latest_materialization_event(AssetKey("documents_lance"))
    assert (
        lance_event.asset_materialization.metadata["lance_version"].value
        == views_run.states["batch_a_changed"].lance_version
    )
    check_key = AssetCheckKey(AssetKey("curated_documents"), "rows_match_decontaminate")
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([check_key])[check_key]
    evaluation = record.event.dagster_event.event_specific_data
    assert evaluation.passed
    assert evaluation.metadata["table_rows"].value == views_run.states["batch_a_changed"].rows


def test_data_files_written_on_two_workers_hold_the_same_rows_in_the_same_order(
    views_run, tmp_path, monkeypatch
):
    """The release copies a batch's text into the table's data files on the worker pool, one task per run of
    decontaminate parts: a table synced that way holds the rows the in-process sync writes, in part order."""
    from fm_assets.datasets import views
    from fm_assets.engine.pool import spread_over

    def synced_rows(root: Path, workers: int) -> tuple[list[str], int]:
        catalog = IcebergCatalogResource(root=str(root)).catalog()
        with spread_over(workers):
            sync = views.sync_curated_documents(views_run.store, catalog)
        table = catalog.load_table(CURATED_TABLE)
        ids = []
        for batch in sorted(sync.versions):
            scan = table.scan(row_filter=EqualTo("batch", batch), selected_fields=("doc_id",))
            ids += [
                doc_id
                for task in scan.plan_files()
                for doc_id in pq.read_table(task.file.file_path.removeprefix("file://"), columns=["doc_id"])[
                    "doc_id"
                ].to_pylist()
            ]
        assert sync.rows_written == sync.rows == len(ids)
        return ids, len(list(table.scan().plan_files()))

    one_process, one_process_files = synced_rows(tmp_path / "in-process", 1)
    monkeypatch.setattr(views, "GROUP_BYTES", 1)  # a task per part
    on_workers, worker_files = synced_rows(tmp_path / "workers", 2)
    parts = sum(
        len(read_success(views_run.store, "decontaminate", b).parts)
        for b in (views_run.batch_a, views_run.batch_b, views_run.batch_early)
    )
    assert on_workers == one_process and len(on_workers) == views_run.states["batch_a_changed"].rows
    assert one_process_files == 3 and worker_files == parts > 3  # one data file per part, each batch's rows


def test_lance_rows_read_on_two_workers_are_the_in_process_rows(views_run):
    """documents_lance reads each part's text (for n_chars) on the worker pool: the same rows, same order."""
    from fm_assets.datasets.views import iter_document_rows
    from fm_assets.engine.pool import spread_over

    batches = sorted([views_run.batch_a, views_run.batch_b, views_run.batch_early])
    in_process = pa.Table.from_batches(list(iter_document_rows(views_run.store, batches)))
    with spread_over(2):
        on_workers = pa.Table.from_batches(list(iter_document_rows(views_run.store, batches)))
    assert on_workers.num_rows == in_process.num_rows == views_run.states["batch_a_changed"].rows
    assert on_workers.equals(in_process)
    assert pc.sum(on_workers["n_chars"]).as_py() > 0
