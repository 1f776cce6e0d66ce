"""Per-document work of partition-wide stages runs as units of auxiliary outputs (``engine.aux_output``).

near_dedup's MinHash signatures (its ``signatures`` output) and exact dedup's keys (``keys``): on 1 or 2
worker processes the stages write the same bytes, near_dedup the same removals and band index as computing
every signature in the driver; the output is reused by a later run and recomputed when damaged."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pool_helpers import BATCH, run_one, settings, side_resources

from fm_assets.defs.resources.spark import SparkResource
from fm_assets.engine import layout
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.refs import read_success
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.reports.cost import cost_rows
from fm_assets.settings import Settings
from fm_assets.stages.dedup import STAGE as DEDUP
from fm_assets.stages.near_dedup import STAGE as NEAR_DEDUP
from fm_assets.stages.registry import TEXT_STAGES
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.job import choose_engine
from fm_assets.transforms.dedup.near_dup.local import run_local_near_dedup

pytestmark = [pytest.mark.slow]

LICENCE = "CC-BY-SA-4.0"
VARIANTS = 12
EXACT = 3  # verbatim copies: exact dedup's


def near_copy(text: str, rng: random.Random) -> str:
    """``text`` with two words of its second half replaced: a near duplicate, not an exact one."""
    words = text.split()
    for _ in range(2):
        i = rng.randrange(len(words) // 2, len(words))
        words[i] = words[i][::-1] + "x"
    return " ".join(words)


@pytest.fixture(scope="module")
def until_blocklist(real_sample: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch of real documents plus planted near copies of some, run in-process up to blocklist."""
    rng = random.Random(7)
    docs = []
    for path in sorted(Path(real_sample["dest"]).rglob("*.jsonl")):
        docs += [json.loads(line) for line in path.read_text().splitlines()]
    long_docs = [d for d in docs if len(d["text"].split()) > 300][:200]
    assert len(long_docs) >= VARIANTS * 2, "the sample should hold enough long documents"
    src = tmp_path_factory.mktemp("near-src") / "docs.jsonl"
    rows = [{"text": d["text"], "url": d["url"]} for d in long_docs]
    rows += [{"text": near_copy(d["text"], rng), "url": d["url"] + "#copy"} for d in long_docs[:VARIANTS]]
    rows += [{"text": d["text"], "url": d["url"] + "#same"} for d in long_docs[-EXACT:]]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))

    root = tmp_path_factory.mktemp("near-upstream") / "root"
    store = ObjectStore(str(root))
    land_batch(store, src, source="planted", license_id=LICENCE, namespace="cloud", batch_id=BATCH)
    config = settings(workers=1, near_dedup=True, land_rows_per_part=40)
    for stage in TEXT_STAGES:
        if stage.name == NEAR_DEDUP.name:
            break
        materialize(stage, StageContext(store, BATCH, config, side_resources()))
    return root


def copy_root(src: Path, dest: Path) -> ObjectStore:
    shutil.copytree(src, dest)
    return ObjectStore(str(dest))


def near_dedup(store: ObjectStore, workers: int) -> Any:
    spark = SparkResource(master="local[1]")  # never started: the batch is below the in-process threshold
    return run_one(store, NEAR_DEDUP, settings(workers=workers, near_dedup=True), spark=spark)


def signatures_folder(store: ObjectStore, stage: str = "near_dedup", name: str = "signatures") -> Path:
    found = sorted((Path(store.root) / "stages" / stage / BATCH).glob(f"{name}-*"))
    assert len(found) == 1, found
    return found[0]


def file_digests(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` but unit markers, _SUCCESS.json and the checks' costs (they hold
    timings)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "_units" not in p.parts and p.name not in (layout.SUCCESS, layout.CHECK_COSTS)
    }


def test_signature_units_on_two_workers_equal_one_worker_and_the_driver_path(
    until_blocklist: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fm_assets.stages.near_dedup")
    runs = {}
    for workers in (1, 2):
        store = copy_root(until_blocklist, tmp_path / f"w{workers}")
        outcome = near_dedup(store, workers)
        runs[workers] = (store, outcome)
    (store1, one), (store2, two) = runs[1], runs[2]
    # the band index was written while the removal units ran (engine.beside_units), not before them
    beside = [r for r in caplog.records if "written beside the units" in r.getMessage()]
    assert len(beside) == 2 and all(r.threadName.startswith("beside-units") for r in beside)
    assert one.data_version == two.data_version
    assert file_digests(Path(store1.root) / one.prefix) == file_digests(Path(store2.root) / two.prefix)
    sigs1, sigs2 = signatures_folder(store1), signatures_folder(store2)
    assert file_digests(sigs1) == file_digests(sigs2)
    upstream = read_success(store2, "blocklist", BATCH)
    sig_success = json.loads((sigs2 / layout.SUCCESS).read_text())
    assert sig_success["cost"]["units_where"] == "2 worker processes"
    assert len(sig_success["units"]) == len(upstream.parts) >= 2
    assert sig_success["counts"]["records_out"] == upstream.counts.records_out
    assert one.success.artifacts["aux_outputs"] == [str(sigs1.relative_to(store1.root))]
    (row,) = [
        r for r in cost_rows(store1) if r["stage"] == "near_dedup"
    ]  # the signatures' units are its cost
    aux_cpu = json.loads((sigs1 / layout.SUCCESS).read_text())["cost"]["cpu_seconds"]
    assert row["cpu_seconds"] == pytest.approx(one.success.cost["cpu_seconds"] + aux_cpu) and aux_cpu > 0
    # the exact scoring's shingling tasks its driver handed to pool.map_on_workers are metered as such
    for outcome in (one, two):
        cost = outcome.success.cost
        assert cost["driver_spread_tasks"] >= 1 and cost["driver_spread_task_seconds"] > 0
        assert cost["driver_spread_wall_seconds"] > 0  # in prepare(), before the units: not within seconds

    # every signature computed in one process, as before the units: the same removals and index bytes
    kept = {
        doc_id
        for part in one.success.parts
        for doc_id in pq.read_table(Path(store1.root) / part, columns=["doc_id"]).column("doc_id").to_pylist()
    }
    reference = run_local_near_dedup(
        [str(Path(store1.root) / p) for p in upstream.parts],
        [],
        str(tmp_path / "ref-index"),
        NearDedupConfig(),
    )
    assert reference.stats["removed"] == one.success.counts.records_rejected >= VARIANTS // 2
    assert set(reference.removed.column("doc_id").to_pylist()).isdisjoint(kept)
    assert file_digests(tmp_path / "ref-index") == file_digests(Path(store1.root) / one.prefix / "band_index")


def test_the_in_process_limit_moves_near_dedup_not_its_output(
    until_blocklist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FM_NEAR_DEDUP_LOCAL_MAX_DOCS picks where near_dedup runs: it reaches the job's engine choice but not
    the stage's key, so changing it neither reruns a batch nor changes what a run writes."""
    monkeypatch.setenv("FM_NEAR_DEDUP_LOCAL_MAX_DOCS", "7")
    assert Settings().pipeline().near_dedup_local_max_docs == 7
    store = copy_root(until_blocklist, tmp_path / "root")
    low = StageContext(store, BATCH, settings(near_dedup=True, near_dedup_local_max_docs=7), side_resources())
    usual = StageContext(store, BATCH, settings(near_dedup=True), side_resources())
    docs = read_success(store, "blocklist", BATCH).counts.records_out
    assert docs > 7
    assert choose_engine(docs, [], NEAR_DEDUP.dedup_config(low)) == "spark"
    assert choose_engine(docs, [], NEAR_DEDUP.dedup_config(usual)) == "local"
    assert NEAR_DEDUP.config(low) == NEAR_DEDUP.config(usual)


def test_signatures_are_reused_and_a_damaged_copy_is_recomputed(
    until_blocklist: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = copy_root(until_blocklist, tmp_path / "root")
    first = near_dedup(store, 1)
    folder = signatures_folder(store)
    before = file_digests(folder)

    store.delete(first.prefix)  # the stage's own output goes (e.g. an earlier batch changed its key)
    store.delete(layout.stage_ref("near_dedup", BATCH))
    with caplog.at_level("INFO", logger="fm_assets.engine.run"):
        again = near_dedup(store, 1)
    assert again.data_version == first.data_version
    assert "near_dedup.signatures" in caplog.text and "cache hit" in caplog.text

    part = sorted(folder.glob("part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:-7])  # truncated: its size no longer matches _SUCCESS.json
    store.delete(again.prefix)
    store.delete(layout.stage_ref("near_dedup", BATCH))
    with caplog.at_level("WARNING", logger="fm_assets.engine.aux_output"):
        third = near_dedup(store, 1)
    assert "signatures output is damaged; recomputing it" in caplog.text
    assert third.data_version == first.data_version
    assert file_digests(folder) == before


def test_exact_dedup_keys_on_two_workers_equal_the_one_worker_run(
    until_blocklist: Path, tmp_path: Path
) -> None:
    store = copy_root(until_blocklist, tmp_path / "root")
    first = read_success(store, "dedup", BATCH)  # the fixture's run: keys on 1 worker
    assert set(first.rejects_by_reason) == {"exact_duplicate"} and first.counts.records_rejected >= EXACT
    before = file_digests(Path(store.root) / first.prefix)
    shutil.rmtree(signatures_folder(store, "dedup", "keys"))
    store.delete(first.prefix)
    again = run_one(store, DEDUP, settings(workers=2, near_dedup=True))
    assert again.prefix == first.prefix and again.data_version == first.data_version
    assert file_digests(Path(store.root) / again.prefix) == before
    keys = signatures_folder(store, "dedup", "keys")
    assert json.loads((keys / layout.SUCCESS).read_text())["cost"]["units_where"] == "2 worker processes"
    assert again.success.artifacts["aux_outputs"] == [str(keys.relative_to(store.root))]
