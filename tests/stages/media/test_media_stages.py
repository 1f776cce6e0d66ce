"""The media chain without Dagster: landing shapes, rejects with reasons, accounting, cross-batch dedup,
reproducible shards that fm_loader.media reads, and the text chain leaving media files alone."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from damaged_files import flip_middle_byte, in_process_and_on_workers
from media_batch import EXPECTED_REJECTS, write_media_batch, write_second_batch

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch, read_batch_manifest
from fm_assets.engine.materialize import materialize
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.reports.report import iter_rejects
from fm_assets.side_inputs.tokenizer import TokenizerRegistry
from fm_assets.stages import land, media_near_dedup
from fm_assets.stages.registry import MEDIA_STAGES
from fm_loader.media.manifest import MediaManifest


@pytest.fixture
def settings():
    return PipelineConfigResource(progress=False, rows_per_shard=4, land_unit_bytes=200_000)


def pin_tokenizer(store: ObjectStore) -> None:
    registry = TokenizerRegistry(store)
    sha = registry.train_bpe(["a harbour at dusk with boats", "please hold the line"] * 20, vocab_size=300)
    registry.pin(sha, origin="test")


def run_media_chain(store, batch, settings):
    outcomes = {}
    for stage in MEDIA_STAGES:
        outcome = materialize(stage, StageContext(store, batch, settings, {})).outcome
        outcomes[stage.name] = outcome
    return outcomes


def rejects(store, outcome) -> list[dict]:
    rows = []
    for rel in outcome.success.rejects:
        with store.open(rel) as handle:
            rows += pq.read_table(handle).to_pylist()
    return rows


def test_media_chain_rejects_accounting_and_cross_batch(tmp_path, settings):
    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    first = land_batch(
        store, write_media_batch(tmp_path / "one"), source="gen", license_id="CC-BY-4.0", namespace="cloud"
    ).batch
    outcomes = run_media_chain(store, first, settings)

    previous_out = None
    for name, outcome in outcomes.items():
        counts = outcome.success.counts
        assert counts.records_in == counts.records_out + counts.records_rejected, name
        if previous_out is not None:
            assert counts.records_in == previous_out, name  # nothing lost between stages
        previous_out = counts.rows_written if name != "media_shard" else None
        for reason, count in EXPECTED_REJECTS.get(name, {}).items():
            assert outcome.success.rejects_by_reason.get(reason) == count, (
                name,
                outcome.success.rejects_by_reason,
            )
        for row in rejects(store, outcome):
            assert row["reason"] and row["stage"] == name and json.loads(row["details"]) is not None

    # every media reject, at any stage, names the landed file to look at: its path inside the batch and key
    landed = {entry["path"] for entry in read_batch_manifest(store, first).files}
    rows = list(iter_rejects(store, first))
    assert {row["stage"] for row in rows} >= set(EXPECTED_REJECTS)
    files = store.local_path(f"landing/{first}/files")
    for row in rows:
        origin, key = row["details"]["origin"], row["details"]["key"]
        inside = Path(row["landed_file"]).relative_to(files).as_posix()
        assert inside in landed and (files / inside).is_file(), row
        assert origin.split("#")[0] == inside and key, row
    cut = next(row for row in rows if row["reason"] == "truncated_image")
    assert cut["stage"] == "media_validate" and cut["landed_file"].endswith(
        f"landing/{first}/files/images/cut.jpg"
    )

    land_counts = outcomes["media_land"].success.counts
    # 10 captioned images + 6 WAVs in folders, 2 samples from the tar, 1 from the JSONL
    assert (land_counts.records_in, land_counts.records_out) == (22, 19)
    filtered = outcomes["media_filter"].success.rejects_by_reason
    assert filtered.get("near_blank_image", 0) + filtered.get("low_entropy_image", 0) >= 1, filtered
    assert any("silence" in reason for reason in filtered), filtered

    near = rejects(store, outcomes["media_near_dedup"])
    assert len(near) == 1
    details = json.loads(near[0]["details"])
    assert details["survivor_id"] != near[0]["doc_id"] and details["cluster_id"]
    assert details["hamming_distance"] <= details["max_distance"]

    shard = outcomes["media_shard"].success
    images = MediaManifest.load(store.uri(shard.artifacts["manifests"]["image"]))
    audio = MediaManifest.load(store.uri(shard.artifacts["manifests"]["audio"]))
    assert images.samples + audio.samples == shard.counts.records_out > 0
    assert audio.shards[0].shape_summary["sample_rates"] == [16000]

    # a near duplicate of a first-batch image in a later batch is caught against the first batch's index
    second = land_batch(
        store, write_second_batch(tmp_path / "two"), source="gen", license_id="CC-BY-4.0", namespace="cloud"
    ).batch
    later = run_media_chain(store, second, settings)
    cross = rejects(store, later["media_near_dedup"])
    assert [json.loads(r["details"])["survivor_batch"] for r in cross] == [first]

    # re-run: every stage is a cache hit; a fresh root gives byte-identical shards
    again = run_media_chain(store, first, settings)
    assert all(o.cache_hit for o in again.values())
    fresh = ObjectStore(str(tmp_path / "fresh"))
    pin_tokenizer(fresh)
    other = land_batch(
        fresh,
        write_media_batch(tmp_path / "one_again"),
        source="gen",
        license_id="CC-BY-4.0",
        namespace="cloud",
        batch_id=first,
    ).batch
    redo = run_media_chain(fresh, other, settings)
    assert redo["media_shard"].data_version == outcomes["media_shard"].data_version


def test_text_land_records_media_files_instead_of_rejecting_them(tmp_path, settings):
    store = ObjectStore(str(tmp_path / "root"))
    folder = write_media_batch(tmp_path / "one")
    (folder / "notes.txt").write_text("A plain text document that is not a caption of anything.\n")
    batch = land_batch(store, folder, source="gen", license_id="MIT", namespace="cloud").batch
    outcome = run_stage(land.STAGE, StageContext(store, batch, settings, {}))
    counts = outcome.success.counts
    assert counts.records_in == 1 and counts.records_out == 1  # only notes.txt is a document
    assert outcome.success.extra["media_files"] > 20


def test_media_stages_are_pure_when_every_committed_unit_is_recomputed(tmp_path, settings):
    """Recompute every committed unit of every media stage and compare bytes (FM_VERIFY_COMMITTED_UNITS)."""
    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    batch = land_batch(
        store, write_media_batch(tmp_path / "one"), source="gen", license_id="CC-BY-4.0", namespace="cloud"
    ).batch
    first = run_media_chain(store, batch, settings)
    for outcome in first.values():  # keep the unit markers and files, drop the commit marker
        store.delete(f"{outcome.prefix}/_SUCCESS.json")
    strict = settings.model_copy(update={"verify_committed_units": True})
    again = run_media_chain(store, batch, strict)
    for name, outcome in again.items():
        assert outcome.units_skipped == len(outcome.success.units) and not outcome.cache_hit, name
        assert outcome.data_version == first[name].data_version, name


@pytest.mark.slow
@pytest.mark.spark
def test_near_dedup_on_spark_writes_what_the_in_process_join_writes(tmp_path, settings, monkeypatch):
    from fm_assets.defs.resources.spark import SparkResource
    from fm_assets.transforms.dedup.image_near_dup import ImageNearDupConfig

    results = {}
    for engine, local_max in (("local", 200_000), ("spark", 0)):
        monkeypatch.setattr(
            media_near_dedup.MediaNearDedupStage, "near_dup", ImageNearDupConfig(local_max_nodes=local_max)
        )
        store = ObjectStore(str(tmp_path / engine))
        pin_tokenizer(store)
        batch = land_batch(
            store,
            write_media_batch(tmp_path / f"src-{engine}"),
            source="gen",
            license_id="CC-BY-4.0",
            namespace="cloud",
            batch_id="b1",
        ).batch
        outcomes = {}
        for stage in MEDIA_STAGES[: MEDIA_STAGES.index(media_near_dedup.STAGE) + 1]:
            ctx = StageContext(
                store, batch, settings, {"spark": SparkResource(master="local[2]", shuffle_partitions=2)}
            )
            outcomes[stage.name] = materialize(stage, ctx).outcome
        near = outcomes["media_near_dedup"].success
        assert near.artifacts["stats"]["engine"] == engine
        results[engine] = (near.data_version, near.rejects_by_reason)
    assert results["local"] == results["spark"]


@pytest.mark.slow
def test_media_chain_on_an_s3_root_writes_what_a_local_root_writes(tmp_path, settings, s3_env):
    """The same delivery through the media chain on S3 (moto) and on a local folder: the same shard bytes."""
    import uuid

    from fm_assets.defs.resources.object_store import ObjectStoreResource

    root = f"s3://{s3_env['bucket']}/media-{uuid.uuid4().hex[:8]}"
    stores = {
        "s3": ObjectStoreResource(root=root, s3_endpoint_url=s3_env["endpoint"]).store(),
        "local": ObjectStore(str(tmp_path / "local")),
    }
    versions = {}
    for name, store in stores.items():
        pin_tokenizer(store)
        batch = land_batch(
            store,
            write_media_batch(tmp_path / f"src-{name}"),
            source="gen",
            license_id="CC-BY-4.0",
            namespace="cloud",
            batch_id="b1",
        ).batch
        outcomes = run_media_chain(store, batch, settings)
        versions[name] = {stage: o.data_version for stage, o in outcomes.items()}
    assert versions["s3"] == versions["local"]


def test_media_shard_integrity_rehashes_shards_and_indexes(tmp_path, settings):
    """The blocking integrity check hashes every shard and sample index the manifests list (on the stage's
    workers when it has some): intact files pass; a changed byte fails it naming that file, either way."""
    from fm_assets.engine import layout
    from fm_assets.stages.media_shard import STAGE as MEDIA_SHARD
    from fm_assets.stages.media_shard import check_media_shard_integrity

    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    batch = land_batch(
        store, write_media_batch(tmp_path / "one"), source="gen", license_id="CC-BY-4.0", namespace="cloud"
    ).batch
    shard = run_media_chain(store, batch, settings)["media_shard"].success
    assert check_media_shard_integrity(store, shard, MEDIA_SHARD).passed
    images = MediaManifest.load(store.uri(shard.artifacts["manifests"]["image"]))
    damaged = store.local_path(layout.in_output(shard.prefix, images.shards[0].path))
    flip_middle_byte(damaged)
    in_process, on_workers = in_process_and_on_workers(
        lambda: check_media_shard_integrity(store, shard, MEDIA_SHARD)
    )
    assert not in_process.passed and in_process.metadata["bad_files"] == [images.shards[0].path]
    assert on_workers == in_process
