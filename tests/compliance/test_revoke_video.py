"""Video revocation end to end through `fm`: two sources' videos are landed, run and released as
``fm-demo-video-text``, a trainer reads the release, the first source is revoked, and then its clips
(``<video id>@cNNN``) are in the older release's bytes and not in the newer one's, the report's byte scan
covered the video shards, the blast radius names the clips and the Lance video view, the older release is
refused by the loader, and the other source's clips are still released."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pipeline_env import set_pipeline_env
from video_fixtures import clip_video

from fm_assets.compliance import blast_radius
from fm_assets.compliance.revocations import list_revocations
from fm_assets.engine.store import ObjectStore
from fm_loader import Loader, RevokedDatasetError

pytestmark = [pytest.mark.slow]
FM = [sys.executable, "-m", "fm_assets.cli.main"]
VIDEOS = "fm-demo-video-text"
REVOKED = ("gen", "CC-BY-4.0")
RUN_ID = "video-test-001"


def ok(*args: str) -> str:
    result = subprocess.run([*FM, *args], env=dict(os.environ), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"fm {' '.join(args)}: {result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout.strip()


def _delivery(folder: Path, videos: dict[str, tuple[float, int]]) -> Path:
    """Captioned videos: name -> (seconds, seed); 5 fps, so a 17 s video is two 8 s clips."""
    folder.mkdir(parents=True)
    for name, (seconds, seed) in videos.items():
        (folder / name).write_bytes(clip_video(seconds, width=96, height=64, fps=5, seed=seed))
        (folder / name).with_suffix(".txt").write_text(f"A moving pattern called {name.split('.')[0]}.")
    return folder


def _latest(store: ObjectStore, name: str) -> str:
    return store.read_json(f"datasets/{name}/LATEST.json")["version"]


def _sample_ids(store: ObjectStore, version: str) -> set[str]:
    """The sample ids read from the bytes of every shard of a release (clip ids, as the shards hold them)."""
    manifest = blast_radius.read_release(store, VIDEOS, version)
    ids: set[str] = set()
    for path in blast_radius.shard_paths(VIDEOS, version, manifest):
        ids |= blast_radius.scan_shard_bytes(store, path)[2]
    return ids


@pytest.fixture(scope="module")
def world(tokenizer_file, tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("revoke_video")
    with pytest.MonkeyPatch.context() as env:
        set_pipeline_env(env, tmp, tokenizer_file)
        root = tmp / "root"
        store = ObjectStore(str(root))
        world: dict[str, Any] = {"root": root, "store": store}
        revoked = _delivery(tmp / "gen", {"street.mp4": (17.0, 1), "lake.mp4": (9.0, 2)})
        ok("land", str(revoked), "--source", REVOKED[0], "--license", REVOKED[1])
        ok(
            "land",
            str(_delivery(tmp / "keep", {"river.mp4": (9.0, 3)})),
            "--source",
            "keep",
            "--license",
            "MIT",
        )
        ok("run")
        world["v1"] = _latest(store, VIDEOS)
        manifest = str(root / "datasets" / VIDEOS / world["v1"] / "manifest.json")
        with Loader(manifest, global_batch_size=2, seed=7, run_id=RUN_ID, receipts=str(root)) as loader:
            for _, _ in zip(range(1), loader, strict=False):
                loader.state_dict()
        world["stdout"] = ok("revoke", "--source", REVOKED[0], "--license", REVOKED[1],
                             "--reason", "LEGAL-22 video takedown", "--requested-by", "legal")  # fmt: skip
        world["v2"] = _latest(store, VIDEOS)
        (revocation,) = list_revocations(store)
        world["revocation"] = revocation
        world["report"] = store.read_json(f"compliance/revocations/{revocation.id}/report.json")
        world["report_md"] = (root / f"compliance/revocations/{revocation.id}/report.md").read_text()
        yield world


def test_the_revoked_clips_leave_the_next_video_release_and_the_byte_scan_proves_it(world):
    store = world["store"]
    affected = blast_radius.affected_documents(store, world["revocation"])
    assert len(affected.doc_ids) == 2  # street and lake: videos, as landed
    before, after = _sample_ids(store, world["v1"]), _sample_ids(store, world["v2"])
    assert world["v2"] != world["v1"]
    revoked_before = {c for c in before if blast_radius.base_doc_id(c) in affected.doc_ids}
    assert len(revoked_before) == 3 and all("@c" in c for c in revoked_before)  # street's 2 clips, lake's 1
    assert not {blast_radius.base_doc_id(c) for c in after} & affected.doc_ids
    assert len(after) == 1  # river's clip is still released
    verified = {v["dataset"]: v for v in world["report"]["verification"]}
    assert verified[VIDEOS]["version"] == world["v2"] and verified[VIDEOS]["ok"]
    assert verified[VIDEOS]["samples_scanned"] == 1 and verified[VIDEOS]["shards_scanned"] >= 1
    assert world["report"]["verified"] is True


def test_the_byte_scan_finds_clips_of_a_revoked_video(world):
    """The scan maps a clip id to its video (the ids the revocation covers): the older release fails it."""
    store = world["store"]
    affected = blast_radius.affected_documents(store, world["revocation"])
    manifest = blast_radius.read_release(store, VIDEOS, world["v1"])
    found: set[str] = set()
    for path in blast_radius.shard_paths(VIDEOS, world["v1"], manifest):
        found |= blast_radius.scan_shard_bytes(store, path)[1] & affected.doc_ids
    assert found == affected.doc_ids


def test_the_blast_radius_names_the_clips_the_lance_view_and_the_training_run(world):
    report = world["report"]
    (held,) = [v for v in report["dataset_versions"] if v["dataset"] == VIDEOS]
    assert held["version"] == world["v1"] and held["documents"] == 2 and held["shards"]
    assert sorted(held["samples"]) == sorted(
        c for c in _sample_ids(world["store"], world["v1"]) if not c.startswith(_river_id(world))
    )
    assert all(c in world["report_md"] for c in held["samples"])  # the Markdown names them too
    lance = [v for v in report["lance_versions"] if v["uri"].endswith("videos.lance")]
    assert lance and lance[-1]["documents"] == 3  # the view's rows are clips: three of them
    runs = {(t["run_id"], t["dataset"], t["version"]) for t in report["training_runs"]}
    assert (RUN_ID, VIDEOS, world["v1"]) in runs


def _river_id(world: dict[str, Any]) -> str:
    (clip,) = _sample_ids(world["store"], world["v2"])
    return blast_radius.base_doc_id(clip)


def test_the_older_video_release_is_refused_and_the_newer_one_reads(world):
    root = world["root"]
    marked = {(m["dataset"], m["version"]): m["superseded_by"] for m in world["report"]["marked_revoked"]}
    assert marked[(VIDEOS, world["v1"])] == world["v2"]
    with pytest.raises(RevokedDatasetError, match="allow_revoked=True"):
        Loader(str(root / "datasets" / VIDEOS / world["v1"] / "manifest.json"), global_batch_size=2)
    with Loader(
        str(root / "datasets" / VIDEOS / world["v2"] / "manifest.json"), global_batch_size=1
    ) as loader:
        batch = next(iter(loader))
    assert batch["frames"].shape[:2] == (1, 4) and bool(batch["frame_mask"].all())
    assert json.loads(json.dumps(world["report"]["revocation"]))["source"] == REVOKED[0]
