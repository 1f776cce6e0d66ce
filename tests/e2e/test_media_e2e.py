"""Images and audio end to end through the `fm` CLI and a real Dagster instance, beside text in one batch.

A generated delivery (good images, a near duplicate, an exact duplicate, a truncated JPEG, a non-image, a
pixel bomb, a blank image, WAVs incl. zero-length, silent and an unknown codec, a WebDataset tar and a media
JSONL) plus a few real text documents is landed with `fm land` and run with `fm run`: every media stage
balances its accounting, rejects carry reasons, the near duplicate names its cluster and survivor, a later
batch's near duplicate is caught against the first batch, a re-run is all cache hits, a fresh root gives
byte-identical shards, the shards read back, `fm audit` lists the media checks and the text chain still
produces its shards.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from media_batch import EXPECTED_REJECTS, write_media_batch, write_second_batch

from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_ref, read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.reports.report import iter_rejects
from fm_assets.stages.batch_chains import batch_chains
from fm_assets.stages.names import CHAIN_NAMES
from fm_loader.manifest import DatasetManifest
from fm_loader.media.loader import MediaLoader
from fm_loader.media.manifest import MediaManifest
from fm_loader.media.verify import verify_media_dataset

pytestmark = [pytest.mark.slow]

TEXT_DOCS = 8


def fm(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "fm_assets.cli.main", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "FM_ROOT": str(root)},
    )
    assert result.returncode == 0, f"fm {' '.join(args)}: {result.stderr[-3000:]}"
    return result


def add_text_documents(folder: Path, sample: dict) -> None:
    """A few real documents (long enough for the text filters) as one JSONL beside the media."""
    texts = []
    for path in sorted(Path(sample["dest"]).rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line)["text"]
            if 400 < len(text.split()) < 3000:
                texts.append(text)
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:TEXT_DOCS]))


def land(folder: Path, root: Path) -> str:
    return fm("land", str(folder), "--source", "gen", "--license", "CC-BY-4.0", root=root).stdout.strip()


def executed_notebook_summary(root: Path) -> dict:
    """Run notebooks/media_overview.ipynb top to bottom against ``root``; its one SUMMARY line."""
    import nbclient
    import nbformat

    path = Path(__file__).resolve().parents[2] / "notebooks" / "media_overview.ipynb"
    notebook = nbformat.read(path, as_version=4)
    os.environ["FM_ROOT"] = str(root)  # the kernel inherits it (monkeypatched by fm_env)
    nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    lines = [
        line
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        for line in output.get("text", "").splitlines()
        if line.startswith("SUMMARY ")
    ]
    assert len(lines) == 1
    return json.loads(lines[0].removeprefix("SUMMARY "))


def shard_files(store: ObjectStore, batch: str) -> dict[str, str]:
    """Every media shard's file name -> sha256, from the partition manifests."""
    success = read_success(store, "media_shard", batch)
    found = {}
    for rel in success.artifacts["manifests"].values():
        for entry in MediaManifest.from_json(store.read_bytes(rel)).shards:
            found[entry.path] = entry.sha256
            found[entry.index_path] = entry.index_sha256
    return found


def test_media_and_text_through_fm_land_and_fm_run(fm_env, real_sample, tmp_path, monkeypatch):
    monkeypatch.setenv("FM_MIN_PACKING_EFFICIENCY", "0.5")
    root = fm_env
    store = ObjectStore(str(root))
    delivery = write_media_batch(tmp_path / "one")
    add_text_documents(delivery, real_sample)
    first = land(delivery, root)
    fm("run", root=root)

    # accounting at every media stage, nothing lost between them, rejects kept with reasons
    previous = None
    for stage in CHAIN_NAMES["media"]:
        success = read_success(store, stage, first)
        counts = success.counts
        assert counts.records_in == counts.records_out + counts.records_rejected, stage
        if previous is not None:
            assert counts.records_in == previous, stage
        previous = counts.rows_written
        for reason, count in EXPECTED_REJECTS.get(stage, {}).items():
            assert success.rejects_by_reason.get(reason) == count, (stage, success.rejects_by_reason)
        rows = list(iter_rejects(store, first, stage))
        assert len(rows) == counts.records_rejected and all(r["reason"] for r in rows), stage
    (near,) = iter_rejects(store, first, "media_near_dedup")
    assert near["reason"] == "near_duplicate"
    assert near["details"]["cluster_id"] and near["details"]["survivor_id"] != near["doc_id"]

    # the text chain read the documents only, and still made its shards
    land_counts = read_success(store, "land", first)
    assert land_counts.counts.records_in == TEXT_DOCS and land_counts.extra["media_files"] > 20
    text_manifest = DatasetManifest.from_json(
        store.read_bytes(read_success(store, "shard", first).artifacts["manifest"])
    )
    assert text_manifest.rows > 0

    # the multimodal release references the shards, and they read back: three members per sample, the
    # json carries licence and provenance down to the raw CAS hash, every shard matches its sha256
    latest = store.read_json("datasets/fm-demo-image-text/LATEST.json")["version"]
    released = MediaManifest.load(store.uri(f"datasets/fm-demo-image-text/{latest}/manifest.json"))
    assert released.samples == read_success(store, "media_shard", first).artifacts["samples"]["image"]
    for entry in released.shards:
        with open(released.shard_uri(entry), "rb") as handle:
            data = handle.read()
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            names = tar.getnames()
            metas = [json.loads(tar.extractfile(n).read()) for n in names if n.endswith(".json")]  # type: ignore[union-attr]
        assert len(names) == 3 * entry.samples
        assert all(
            m["licence"] == "CC-BY-4.0"
            and store.exists(f"cas/{m['provenance']['media_sha256'][:2]}/{m['provenance']['media_sha256']}")
            for m in metas
        )
        assert all(m["width"] > 0 and m["height"] > 0 for m in metas)
    audio_latest = store.read_json("datasets/fm-demo-audio-text/LATEST.json")["version"]
    audio = MediaManifest.load(store.uri(f"datasets/fm-demo-audio-text/{audio_latest}/manifest.json"))
    assert audio.samples >= 3 and {r for s in audio.shards for r in s.shape_summary["sample_rates"]} == {
        16000
    }

    # fm_loader.media verifies every sample of both releases and feeds fixed-shape batches from them
    assert verify_media_dataset(released).problems == [] and verify_media_dataset(audio).problems == []
    images_batch = next(iter(MediaLoader(released, global_batch_size=2, max_caption_tokens=16)))
    assert images_batch["images"].shape[:2] == (2, 3) and images_batch["caption_mask"].any()
    audio_batch = next(iter(MediaLoader(audio, global_batch_size=2)))
    assert audio_batch["audio"].shape == audio_batch["audio_mask"].shape and audio_batch["valid"].all()

    # the Lance views (images with thumbnails, audio) hold every released sample; the notebook browses them
    summary = executed_notebook_summary(root)
    assert (summary["images"], summary["audio"]) == (released.samples, audio.samples)
    assert 0 < summary["max_thumbnail_side"] <= 128 and summary["audio_sample_rates"] == [16000]
    assert summary["images_by_license"] == {"CC-BY-4.0": released.samples}

    # a second batch: its near duplicate of the first batch's harbour is caught against the first batch
    second = land(write_second_batch(tmp_path / "two"), root)
    fm("run", second, root=root)
    (cross,) = iter_rejects(store, second, "media_near_dedup")
    assert cross["details"]["survivor_batch"] == first and cross["details"]["survivor_in_earlier_batch"]

    # a re-run does no work: every stage of each batch's own chains is a cache hit (the second batch is media
    # only: it has no text stages at all)
    fm("run", root=root)
    assert batch_chains(store, first) == ("text", "media") and batch_chains(store, second) == ("media",)
    assert read_ref(store, "land", second) is None
    for batch in (first, second):
        for stage in (name for chain in batch_chains(store, batch) for name in CHAIN_NAMES[chain]):
            ref = read_ref(store, stage, batch)
            assert ref is not None and ref.last_cache_hit, (batch, stage)

    # `fm audit` lists the media checks with their outcomes
    audit = json.loads(fm("audit", "--json", root=root).stdout)
    stages = next(b for b in audit["batches"] if b["batch"] == first)["stages"]
    assert "decode_failure_rate" in stages["media_validate"]["checks"]
    assert (
        "duplicate_rate" in stages["media_dedup"]["checks"]
        and "duplicate_rate" in stages["media_near_dedup"]["checks"]
    )
    assert stages["media_shard"]["checks"]["bucket_balance"]["metadata"]["images"] > 0
    media_checks = next(b for b in audit["batches"] if b["batch"] == first)["media_checks"]
    assert media_checks["media_validate.decode_failure_rate"]["decode_failure_rate"] == round(5 / 19, 4)

    # the same delivery in a fresh root (same batch id) gives byte-identical media shards
    fresh = tmp_path / "fresh"
    again = write_media_batch(tmp_path / "one_again")
    add_text_documents(again, real_sample)
    land_batch(
        ObjectStore(str(fresh)),
        again,
        source="gen",
        license_id="CC-BY-4.0",
        namespace="cloud",
        batch_id=first,
    )
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home_fresh"))
    (tmp_path / "dagster_home_fresh").mkdir()
    fm("run", first, "--no-release", root=fresh)
    assert shard_files(ObjectStore(str(fresh)), first) == shard_files(store, first)
