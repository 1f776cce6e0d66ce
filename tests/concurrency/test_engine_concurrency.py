"""Cross-batch state under concurrency, through the engine (no Dagster): three landed batches with exact and
near duplicates across them, run serially in id order in one root and concurrently in reverse order (one
thread per batch, each waiting on ``EarlierBatchPending`` like the Dagster assets) in another. Every stage's
output folder, data version and file hashes, and the trained tokenizer, must be identical; no cross-batch
duplicate may survive. Also: a batch whose earlier batch never runs gets a clear error instead of output."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from concurrency_helpers import (
    BATCH_IDS,
    PendingLog,
    assert_no_cross_batch_duplicates,
    build_corpus,
    fingerprint,
    land_corpus,
    run_chain_waiting,
)

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.refs import EarlierBatchPending, read_ref, read_success, write_ref
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import StageContext
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.side_inputs.tokenizer import TokenizerSpec, ensure_pinned
from fm_assets.stages.registry import TEXT_STAGES

log = logging.getLogger(__name__)

TOKENIZER = TokenizerSpec(train_vocab_size=512)  # nothing configured: the tokenizer asset trains one


def resources(spark: bool) -> dict:
    found: dict = {"blocklists": BlocklistSource(), "eval_registry": EvalRegistry()}
    if spark:
        from fm_assets.defs.resources.spark import SparkResource

        found["spark"] = SparkResource(master="local[2]", shuffle_partitions=2)
    return found


@pytest.mark.slow
@pytest.mark.spark
def test_concurrent_reverse_order_equals_serial(tmp_path: Path, real_sample: dict) -> None:
    settings = PipelineConfigResource(progress=False, near_dedup=True, seq_len=64, rows_per_shard=4)
    corpus = build_corpus(real_sample)
    batches: list[str] = list(BATCH_IDS)
    shared = resources(spark=True)

    serial_store = land_corpus(tmp_path / "serial", corpus, tmp_path)
    serial_pending = PendingLog()
    for batch in batches:
        run_chain_waiting(serial_store, batch, settings, shared, TOKENIZER, serial_pending)
    assert serial_pending.events == []  # in id order nothing ever waits

    store = land_corpus(tmp_path / "concurrent", corpus, tmp_path)
    pending = PendingLog()
    later_waiting = {batch: threading.Event() for batch in batches[1:]}

    def note(batch: str, stage: str) -> None:
        if batch in later_waiting:
            later_waiting[batch].set()

    errors: list[BaseException] = []

    def chain(batch: str) -> None:
        try:
            run_chain_waiting(store, batch, settings, shared, TOKENIZER, pending, on_pending=note)
        except BaseException as exc:  # re-raised by the test thread below
            errors.append(exc)

    threads = {batch: threading.Thread(target=chain, args=(batch,), name=batch) for batch in batches}
    started = time.perf_counter()
    for batch in reversed(batches[1:]):  # the later batches first: they reach dedup before the first exists
        threads[batch].start()
    for batch in batches[1:]:
        assert later_waiting[batch].wait(timeout=300), f"{batch} never waited for the first batch"
    assert read_ref(store, "dedup", batches[0]) is None
    threads[batches[0]].start()
    for thread in threads.values():
        thread.join(timeout=900)
        assert not thread.is_alive(), f"{thread.name} did not finish"
    assert errors == [], errors
    concurrent_seconds = time.perf_counter() - started

    # the later batches waited at dedup for every earlier batch they lacked (and never ran without them)
    for batch in batches[1:]:
        assert "dedup" in pending.stages_of(batch)
    assert all(
        set(missing) <= set(batches) and all(m < b for m in missing) for b, _, missing in pending.events
    )

    serial = fingerprint(serial_store, batches)
    concurrent = fingerprint(store, batches)
    assert serial.differences(concurrent) == []
    assert store.read_json("tokenizers/pinned.json")["origin"] == f"trained:{batches[0]}"
    for index, batch in enumerate(batches):  # each dedup saw (and is keyed on) every earlier batch
        for stage in ("dedup", "near_dedup"):
            inputs = read_success(store, stage, batch).inputs
            assert sorted(k.split(":", 1)[1] for k in inputs if k.startswith(f"{stage}:")) == batches[:index]
    assert_no_cross_batch_duplicates(store, corpus)
    assert_no_cross_batch_duplicates(serial_store, corpus)
    log.info("concurrent chains took %.1fs; waits: %s", concurrent_seconds, pending.events)


def test_earlier_batch_never_run_is_a_clear_error(tmp_path: Path, real_sample: dict) -> None:
    settings = PipelineConfigResource(progress=False, near_dedup=False, seq_len=64, rows_per_shard=4)
    corpus = build_corpus(real_sample, batches=2)
    first, second = BATCH_IDS[:2]
    store = land_corpus(tmp_path / "root", corpus, tmp_path)
    ctx = StageContext(store, second, settings, resources(spark=False))
    for stage in TEXT_STAGES:
        if stage.name == "dedup":
            with pytest.raises(EarlierBatchPending) as raised:
                run_stage(stage, ctx)
            break
        outcome = run_stage(stage, ctx)
        write_ref(store, stage.name, second, outcome.success, cache_hit=False, wall_seconds=0.0)
    error = raised.value
    assert (error.stage, error.missing) == ("dedup", [first])
    assert f"fm run {first}" in str(error) and f"dedup[{second}]" in str(error)
    assert read_ref(store, "dedup", second) is None  # nothing was written with a partial prior set
    assert not store.exists(f"stages/dedup/{second}")

    # the tokenizer cannot be trained on "whatever is done": it waits for the earliest batch
    with pytest.raises(EarlierBatchPending) as tokenizer_error:
        ensure_pinned(store, TOKENIZER)
    assert tokenizer_error.value.missing == [first] and f"fm run {first}" in str(tokenizer_error.value)
    assert not store.exists("tokenizers/pinned.json")

    # gave_up (what the Dagster asset raises when its wait budget is spent) says so
    assert "Gave up after waiting 120s" in str(error.gave_up(120))
