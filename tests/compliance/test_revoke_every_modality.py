"""Issue 24's acceptance walk on the real pipeline: text and images of one source land beside another
source's, a trainer reads a few steps of both releases with read receipts, the source is revoked, and then
no revoked document or image is in the bytes of the newest text and image releases, both older versions are
refused by their loaders, the report names the training runs and their last step, and `fm trace` of a row
read before the revocation names the revoked source and licence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from media_fixtures import jpeg_image, png_image
from pipeline_env import set_pipeline_env

from fm_assets.compliance import blast_radius
from fm_assets.compliance.revocations import list_revocations
from fm_assets.engine.store import ObjectStore
from fm_assets.reports import trace
from fm_loader import Loader, RevokedDatasetError
from fm_loader.media.loader import MediaLoader

pytestmark = [pytest.mark.slow]
FM = [sys.executable, "-m", "fm_assets.cli.main"]
TEXT, IMAGES = "fm-demo", "fm-demo-image-text"
REVOKED = ("gen", "CC-BY-4.0")
TEXT_RUN, IMAGE_RUN = "llama-test-001", "vlm-test-001"
TEXT_STEPS = 3  # global steps the text trainer reads (0, 1, 2) before its last checkpoint
TEXT_BATCH, WORLD = 4, 2


def ok(*args: str) -> str:
    result = subprocess.run([*FM, *args], env=dict(os.environ), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"fm {' '.join(args)}: {result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout.strip()


def _delivery(folder: Path, package: Path, docs: int, seed: int) -> Path:
    """A few real text documents (one JSONL) and three captioned images."""
    folder.mkdir(parents=True)
    lines = []
    for path in sorted(package.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line)["text"]
            if 300 < len(text.split()) < 3000:
                # the text alone: the batch's --license is the documents' licence here (a record licence of
                # its own that differs would be quarantined as license_conflict)
                lines.append(json.dumps({"text": text}))
    (folder / "docs.jsonl").write_text("\n".join(lines[:docs]) + "\n")
    images = folder / "images"
    images.mkdir()
    pictures = {
        f"photo{seed}.jpg": jpeg_image(640, 480, seed=seed),
        f"tall{seed}.jpg": jpeg_image(300, 600, seed=seed + 1),
        f"tiles{seed}.png": png_image(256, 256, seed=seed + 2),
    }
    for name, data in pictures.items():
        (images / name).write_bytes(data)
        (images / name).with_suffix(".txt").write_text(
            f"A picture called {name.split('.')[0]}, for the test.\n"
        )
    return folder


def _latest(store: ObjectStore, name: str) -> str:
    return store.read_json(f"datasets/{name}/LATEST.json")["version"]


def _manifest(root: Path, name: str, version: str) -> str:
    return str(root / "datasets" / name / version / "manifest.json")


def _read_steps(manifest: str, root: Path, run_id: str, batch: int, steps: int) -> None:
    """Each rank reads ``steps`` global batches and checkpoints after each (read receipts on)."""
    for rank in range(WORLD):
        with Loader(manifest, global_batch_size=batch, world_size=WORLD, rank=rank, seed=7, run_id=run_id,
                    receipts=str(root)) as loader:  # fmt: skip
            for _, _ in zip(range(steps), loader, strict=False):
                loader.state_dict()


def _row_of_revoked_source(store: ObjectStore, manifest: str) -> tuple[int, int, int]:
    """(step, rank, row) of a text row the trainer read that holds a document of the revoked source."""
    for step in range(TEXT_STEPS):
        for rank in range(WORLD):
            for row in range(TEXT_BATCH // WORLD):
                located = trace.locate(manifest, step=step, rank=rank, row=row, global_batch_size=TEXT_BATCH,
                                       world_size=WORLD, seed=7)  # fmt: skip
                _, batch, ids = trace.documents_in_row(store, located)
                if trace.provenance(store, ids[0], batch)["source"] == REVOKED[0]:
                    return step, rank, row
    raise AssertionError("the trainer read no row of the revoked source")


@pytest.fixture(scope="module")
def world(real_sample, tokenizer_file, tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("revoke_all")
    with pytest.MonkeyPatch.context() as env:
        set_pipeline_env(env, tmp, tokenizer_file)
        packages = [Path(real_sample["dest"]) / name for name in sorted(real_sample["packages"])]
        root = tmp / "root"
        store = ObjectStore(str(root))
        world: dict[str, Any] = {"root": root, "store": store}
        ok(
            "land",
            str(_delivery(tmp / "gen", packages[0], 12, 10)),
            "--source",
            REVOKED[0],
            "--license",
            REVOKED[1],
        )
        ok("land", str(_delivery(tmp / "keep", packages[-1], 12, 20)), "--source", "keep", "--license", "MIT")
        ok("run")
        world["text_v1"], world["images_v1"] = _latest(store, TEXT), _latest(store, IMAGES)
        text_manifest = _manifest(root, TEXT, world["text_v1"])
        _read_steps(text_manifest, root, TEXT_RUN, TEXT_BATCH, TEXT_STEPS)
        _read_steps(_manifest(root, IMAGES, world["images_v1"]), root, IMAGE_RUN, 2, 1)
        world["traced_row"] = _row_of_revoked_source(store, text_manifest)
        world["revoke_stdout"] = ok("revoke", "--source", REVOKED[0], "--license", REVOKED[1],
                                    "--reason", "LEGAL-90 takedown", "--requested-by", "legal")  # fmt: skip
        world["text_v2"], world["images_v2"] = _latest(store, TEXT), _latest(store, IMAGES)
        (revocation,) = list_revocations(store)
        world["revocation"] = revocation
        world["report"] = store.read_json(f"compliance/revocations/{revocation.id}/report.json")
        step, rank, row = world["traced_row"]
        world["trace"] = json.loads(ok("trace", "--run", TEXT_RUN, "--step", str(step), "--rank", str(rank),
                                       "--row", str(row), "--json"))  # fmt: skip
        world["audit"] = json.loads(ok("audit", "--json"))
        images_v1 = _manifest(root, IMAGES, world["images_v1"])
        world["image_trace"] = []
        for rank in range(WORLD):
            located = trace.locate(
                images_v1, step=0, rank=rank, row=0, global_batch_size=2, world_size=WORLD, seed=7
            )
            _, _, ids = trace.documents_in_row(store, located)
            world["image_trace"] += [
                trace.provenance(store, doc_id) for doc_id in ids
            ]  # found without the batch
        yield world


def test_no_revoked_document_or_image_is_in_the_bytes_of_the_newest_releases(world):
    store, revocation = world["store"], world["revocation"]
    affected = blast_radius.affected_documents(store, revocation)
    images_before = set()
    for name, old, new in ((TEXT, "text_v1", "text_v2"), (IMAGES, "images_v1", "images_v2")):
        assert world[new] != world[old], name
        ids_before, ids_after = set(), set()
        for path in blast_radius.shard_paths(
            name, world[old], blast_radius.read_release(store, name, world[old])
        ):
            ids_before |= blast_radius.scan_shard_bytes(store, path)[1]
        for path in blast_radius.shard_paths(
            name, world[new], blast_radius.read_release(store, name, world[new])
        ):
            ids_after |= blast_radius.scan_shard_bytes(store, path)[1]
        assert ids_before & affected.doc_ids, f"{name}: the revoked source was in the older version"
        assert not ids_after & affected.doc_ids, f"{name}: a revoked sample is still in the newest version"
        assert ids_after, f"{name}: the other source's data is still released"
        if name == IMAGES:
            images_before = ids_before & affected.doc_ids
    assert len(images_before) == 3  # the three images of the revoked source
    verified = {v["dataset"]: v for v in world["report"]["verification"]}
    assert verified[IMAGES]["ok"] and verified[IMAGES]["version"] == world["images_v2"]
    assert world["report"]["verified"] is True


def test_both_older_versions_are_marked_and_refused_by_their_loaders(world):
    root = world["root"]
    marked = {(m["dataset"], m["version"]): m["superseded_by"] for m in world["report"]["marked_revoked"]}
    assert marked == {
        (TEXT, world["text_v1"]): world["text_v2"],
        (IMAGES, world["images_v1"]): world["images_v2"],
    }
    for name, version in ((TEXT, world["text_v1"]), (IMAGES, world["images_v1"])):
        with pytest.raises(RevokedDatasetError, match="allow_revoked=True"):
            Loader(_manifest(root, name, version), global_batch_size=2)
        Loader(_manifest(root, name, version), global_batch_size=2, allow_revoked=True).close()
    with pytest.raises(RevokedDatasetError):  # the deprecated media alias shares the refusal
        MediaLoader(_manifest(root, IMAGES, world["images_v1"]), 2)
    held = {(v["dataset"], v["version"]): v for v in world["report"]["dataset_versions"]}
    assert held[(IMAGES, world["images_v1"])]["shards"]  # the image shards that held them are named
    assert any(v["uri"].endswith("images.lance") for v in world["report"]["lance_versions"])
    assert {"shard", "media_shard", "dataset_release", "media_dataset_release"} <= {
        r["asset"] for r in world["report"]["runs"]
    }


def test_the_report_names_the_training_runs_and_how_far_each_got(world):
    runs = {(t["run_id"], t["dataset"], t["version"]): t for t in world["report"]["training_runs"]}
    text = runs[(TEXT_RUN, TEXT, world["text_v1"])]
    assert text["last_step"] == TEXT_STEPS - 1 and text["ranks"] == [0, 1] and text["world_size"] == WORLD
    assert text["seed"] == 7
    assert runs[(IMAGE_RUN, IMAGES, world["images_v1"])]["last_step"] == 0
    assert (
        f"training run {TEXT_RUN} read {TEXT} {world['text_v1']} up to step {TEXT_STEPS - 1}"
        in world["revoke_stdout"]
    )
    listed = {
        (t["dataset"], t["version"], t["run_id"]) for t in world["audit"]["compliance"]["training_runs"]
    }
    assert (TEXT, world["text_v1"], TEXT_RUN) in listed and (IMAGES, world["images_v1"], IMAGE_RUN) in listed


def test_trace_of_a_row_read_before_the_revocation_names_the_revoked_source_and_licence(world):
    documents = world["trace"]["documents"]
    assert documents and all((d["source"], d["license"]) == REVOKED for d in documents)
    first = documents[0]
    assert first["landed_file"].startswith(f"landing/{first['batch']}/files/")
    landed = (world["root"] / first["landed_file"]).read_text().splitlines()
    assert first["line"] == first["record_index"] + 1 and landed[first["line"] - 1].strip()  # the raw record
    stages = {s["stage"]: s for s in first["stages"]}
    assert stages["land"]["outcome"] == "kept"
    assert stages["blocklist"] == {"stage": "blocklist", "outcome": "rejected", "reason": "revoked_license"}
    assert {"dataset": TEXT, "version": world["text_v1"], "revoked": True} in first["dataset_versions"]
    assert world["trace"]["seconds"] < 5


def test_trace_of_an_image_sample_read_by_the_trainer_names_its_file_and_what_media_filter_did(world):
    assert len(world["image_trace"]) == WORLD
    for sample in world["image_trace"]:
        assert sample["chain"] == "media" and sample["origin"].startswith("images/")
        assert (world["root"] / sample["landed_file"]).is_file()
        stages = {s["stage"]: s for s in sample["stages"]}
        if (sample["source"], sample["license"]) == REVOKED:
            assert stages["media_filter"]["reason"] == "revoked_license"
            assert {"dataset": IMAGES, "version": world["images_v1"], "revoked": True} in sample[
                "dataset_versions"
            ]
        else:
            assert stages["media_filter"]["outcome"] == "kept"
            assert any(v["version"] == world["images_v2"] for v in sample["dataset_versions"])
