"""A batch whose cross-batch state needs an earlier batch fails at once, naming it, when that batch's latest run
of the stage failed (waiting could not help: nobody re-runs a failed batch by itself); it still waits while the
earlier batch has simply not run yet, and goes on once the earlier batch has succeeded."""

from __future__ import annotations

import pytest

from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import (
    EarlierBatchFailed,
    EarlierBatchPending,
    clear_failure,
    earlier_outputs,
    record_failure,
)
from fm_assets.engine.store import ObjectStore


def _two_batches(tmp_path) -> tuple[ObjectStore, str, str]:
    store = ObjectStore(str(tmp_path / "root"))
    batches = []
    for name in ("a", "b"):
        src = tmp_path / name
        src.mkdir()
        (src / "doc.jsonl").write_text('{"text": "one document"}\n')
        batches.append(land_batch(store, src, source=name, license_id="MIT", namespace="cloud").batch)
    first, second = sorted(batches)
    return store, first, second


def test_waits_while_the_earlier_batch_has_not_run(tmp_path):
    store, first, second = _two_batches(tmp_path)
    with pytest.raises(EarlierBatchPending) as pending:
        earlier_outputs(store, "dedup", second)
    assert pending.value.missing == [first]


def test_fails_at_once_naming_the_failed_earlier_batch(tmp_path):
    store, first, second = _two_batches(tmp_path)
    record_failure(store, "dedup", first, ValueError("disk full"))
    with pytest.raises(EarlierBatchFailed) as failed:
        earlier_outputs(store, "dedup", second)
    message = str(failed.value)
    assert first in message and "ValueError: disk full" in message and f"fm run {first}" in message
    assert failed.value.failed == {first: "ValueError: disk full"}
    clear_failure(store, "dedup", first)  # the earlier batch's next success removes the record
    with pytest.raises(EarlierBatchPending):
        earlier_outputs(store, "dedup", second)
