"""notebooks/dataset_overview.ipynb runs top to bottom against a real pipeline root and reports its numbers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fm_assets.engine.refs import batches_with_ref, read_success

pytestmark = [pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "dataset_overview.ipynb"


def executed_summary(root: Path) -> dict:
    import nbclient
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # the kernel inherits this process's environment: FM_ROOT picks the root, DAGSTER_HOME keeps it isolated
    env = {"FM_ROOT": str(root), "DAGSTER_HOME": str(root.parent / "dagster_home")}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        nbclient.NotebookClient(
            notebook,
            timeout=120,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOK.parent)}},
        ).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    lines = [
        line
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        for line in output.get("text", "").splitlines()
        if line.startswith("SUMMARY ")
    ]
    assert len(lines) == 1, "the notebook must print exactly one SUMMARY line"
    return json.loads(lines[0].removeprefix("SUMMARY "))


def test_notebook_reports_rows_sources_and_tokens_per_license(views_run):
    store = views_run.store
    batches = batches_with_ref(store, "decontaminate")
    rows_by_source: dict[str, int] = {}
    tokens_by_license: dict[str, int] = {}
    for batch in batches:
        manifest = store.read_json(f"landing/{batch}/_batch.json")
        rows = read_success(store, "decontaminate", batch).counts.records_out
        rows_by_source[manifest["source"]] = rows_by_source.get(manifest["source"], 0) + rows
        for part in read_success(store, "tokenize", batch).parts:
            tokens = sum(pq.read_table(store.local_path(part), columns=["n_tokens"])["n_tokens"].to_pylist())
            tokens_by_license[manifest["license"]] = tokens_by_license.get(manifest["license"], 0) + tokens

    summary = executed_summary(views_run.root)

    assert summary["iceberg_rows"] == summary["lance_rows"] == sum(rows_by_source.values())
    assert summary["rows_by_source"] == rows_by_source
    assert summary["tokens_by_license"] == tokens_by_license
    assert summary["snapshot_id"] == views_run.states["batch_a_changed"].snapshot_id
    assert 0.0 < summary["quality_median"] <= 1.0
