"""End to end through a real Dagster instance on real public text: stages, skipping, code versions, release."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, RunsFilter

from fm_assets.cli.runner import dagster_instance, run_batches
from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_ref, read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.engine.verdict import Verdict
from fm_assets.reports.audit import build_audit
from fm_assets.reports.report import build_report, iter_rejects
from fm_assets.settings import load_settings
from fm_assets.stages.normalize import NormalizeStage
from fm_assets.stages.registry import CHAIN_NAMES
from fm_loader.manifest import DatasetManifest

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def land_sample(root: Path, sample: dict) -> list[str]:
    store = ObjectStore(str(root))
    batches = []
    for package, info in sorted(sample["packages"].items()):
        manifest = land_batch(
            store,
            Path(sample["dest"]) / package,
            source=package,
            license_id=info["license"],
            namespace="cloud",
        )
        batches.append(manifest.batch)
    return batches


def refs(store: ObjectStore, batches: list[str]) -> dict[tuple[str, str], dict]:
    return {(b, s): read_ref(store, s, b) for b in batches for s in CHAIN_NAMES["text"]}


def test_graph_end_to_end_skip_and_code_version(fm_env, real_sample, monkeypatch):
    store = ObjectStore(str(fm_env))
    batches = land_sample(fm_env, real_sample)
    assert len(batches) >= 1

    assert run_batches(load_settings()) == {}
    first = refs(store, batches)
    assert all(ref is not None and ref.last_cache_hit is False for ref in first.values())

    # accounting holds for every stage of every batch, and stages chain without losing records
    report = build_report(store, batches)
    assert len(report) == len(batches) * len(CHAIN_NAMES["text"])
    for row in report:
        assert row["records_in"] == row["records_out"] + row["records_rejected"], row
    for batch in batches:
        land = read_success(store, "land", batch)
        assert land.counts.records_in > 0
        shard = read_success(store, "shard", batch)
        manifest = DatasetManifest.load(store.uri(shard.artifacts["manifest"]))
        assert manifest.rows > 0 and manifest.tokens > 0
        assert all(store.exists(f"{shard.prefix}/{entry.path}") for entry in manifest.shards)
        # every rejected record is listed with its stage and reason
        rejected = sum(row["records_rejected"] for row in report if row["batch"] == batch)
        assert sum(1 for _ in iter_rejects(store, batch)) == rejected

    # the real corpora hold duplicates: the dedup stages must find some
    removed = sum(r["records_rejected"] for r in report if r["stage"] in ("dedup", "near_dedup"))
    assert removed > 0

    release = store.read_json("datasets/fm-demo/LATEST.json")["version"]
    released = DatasetManifest.load(store.uri(f"datasets/fm-demo/{release}/manifest.json"))
    # text batches only: their release run materialized the text release, not the media one they left as is
    instance = dagster_instance(load_settings())
    (release_run,) = instance.get_runs(filters=RunsFilter(job_name="release"))
    steps = {step.step_key for step in instance.get_run_step_stats(release_run.run_id)}
    assert steps == {"curated_documents", "dataset_release", "documents_lance"}
    assert released.rows == sum(
        DatasetManifest.load(store.uri(read_success(store, "shard", b).artifacts["manifest"])).rows
        for b in batches
    )

    # the audit report is built from the stored check outcomes and the accounting
    audit = build_audit(store, "fm-demo")
    assert {b["batch"] for b in audit["batches"]} == set(batches)
    landed = sum(read_success(store, "land", b).counts.records_in for b in batches)
    assert sum(row["documents_landed"] for row in audit["licences"].values()) == landed
    assert sum(row["tokens"] for row in audit["licences"].values()) == released.tokens
    for row in audit["batches"]:
        assert row["stages"]["land"]["checks"]["accounting"]["passed"] is True
        assert "no_eval_contamination" in row["stages"]["decontaminate"]["checks"]
        assert "packing_efficiency" in row["stages"]["pack"]["checks"]

    # Dagster saw real materializations with our data versions and checks
    instance = DagsterInstance.get()
    record = instance.get_latest_materialization_event(AssetKey("shard"))
    assert record is not None
    assert (
        record.asset_materialization.tags["dagster/data_version"]
        == first[(record.asset_materialization.partition, "shard")].data_version
    )
    checks = instance.event_log_storage.get_latest_asset_check_execution_by_key  # API presence
    assert checks is not None

    # second run: no work anywhere, same data versions, still a materialization per stage
    before = len(instance.fetch_materializations(AssetKey("tokenize"), limit=100).records)
    assert run_batches(load_settings()) == {}
    second = refs(store, batches)
    for key, ref in second.items():
        assert ref.last_cache_hit is True, key
        assert ref.data_version == first[key].data_version, key
    after = len(instance.fetch_materializations(AssetKey("tokenize"), limit=100).records)
    assert after == before + len(batches)

    # a code-version bump of normalize that changes its output recomputes normalize and every descendant,
    # nothing before it
    original = NormalizeStage.judge

    def judge_v2(self, ctx, record, metrics):
        verdict = original(self, ctx, record, metrics)
        if not verdict.keep:
            return verdict
        return Verdict.kept({**verdict.record, "text": verdict.record["text"] + "\n[normalized by v2]"})

    monkeypatch.setattr(NormalizeStage, "code_version", "normalize-v2-test")
    monkeypatch.setattr(NormalizeStage, "judge", judge_v2)
    assert run_batches(load_settings(), release=False) == {}
    third = refs(store, batches)
    position = CHAIN_NAMES["text"].index("normalize")
    for (batch, stage), ref in third.items():
        if CHAIN_NAMES["text"].index(stage) < position:
            assert ref.last_cache_hit is True, (batch, stage)
            assert ref.prefix == first[(batch, stage)].prefix
        else:
            assert ref.last_cache_hit is False, (batch, stage)
            assert ref.prefix != first[(batch, stage)].prefix

    # a pure refactor (new code version, identical output) recomputes only that stage: its data version is
    # unchanged, so descendants are cache hits (early cutoff, as Dagster's own data-version staleness works)
    monkeypatch.setattr(NormalizeStage, "code_version", "normalize-v3-refactor")
    assert run_batches(load_settings(), release=False) == {}
    fourth = refs(store, batches)
    for (batch, stage), ref in fourth.items():
        assert ref.last_cache_hit is (stage != "normalize"), (batch, stage)
        assert ref.data_version == third[(batch, stage)].data_version
