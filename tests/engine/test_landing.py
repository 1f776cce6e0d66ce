"""Landing reads nothing outside SRC, skips hidden paths by one rule and says so, and a manifest edited after
landing is refused."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import (
    LandingError,
    _hash_walked,
    land_batch,
    read_batch_manifest,
    select_source_files,
)
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.land import STAGE as LAND


@pytest.fixture
def src(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "more.txt").write_text("GPL text\n")
    src = tmp_path / "src"
    (src / "docs").mkdir(parents=True)
    (src / "docs" / "good.jsonl").write_text(json.dumps({"text": "a good document"}) + "\n")
    (src / "passwd.txt").symlink_to(outside / "secret.txt")
    (src / "linked_dir").symlink_to(outside / "dir")
    (src / "alias.jsonl").symlink_to(src / "docs" / "good.jsonl")
    (src / "loop").symlink_to(src)
    (src / ".secretly_skipped.jsonl").write_text(json.dumps({"text": "hidden file"}) + "\n")
    (src / ".git").mkdir()
    (src / ".git" / "data.jsonl").write_text(json.dumps({"text": "hidden folder"}) + "\n")
    (src / "__MACOSX").mkdir()
    (src / "__MACOSX" / "._good.jsonl").write_text("junk")
    return src


def test_only_real_files_inside_src_land_and_every_skip_is_recorded(src, tmp_path):
    files, skipped = select_source_files(src)
    assert [f.rel for f in files] == ["docs/good.jsonl"]
    reasons = {entry["path"]: entry["reason"] for entry in skipped}
    assert reasons == {
        ".git/": "hidden",
        ".secretly_skipped.jsonl": "hidden",
        "__MACOSX/": "os_metadata",
        "alias.jsonl": "symlink_inside_source",
        "linked_dir": "symlink_outside_source",
        "loop": "symlink_inside_source",
        "passwd.txt": "symlink_outside_source",
    }
    targets = {entry["path"]: entry["target"] for entry in skipped if "target" in entry}
    assert targets["alias.jsonl"] == "docs/good.jsonl" and targets["loop"] == "."
    assert targets["passwd.txt"] == str((tmp_path / "outside" / "secret.txt").resolve())
    store = ObjectStore(str(tmp_path / "root"))
    manifest = land_batch(store, src, source="s", license_id="MIT", namespace="cloud", batch_id="b1")
    assert [f["path"] for f in manifest.files] == ["docs/good.jsonl"]
    assert read_batch_manifest(store, "b1").skipped == manifest.skipped
    landed = [p.name for p in (tmp_path / "root").rglob("*") if p.is_file()]
    assert "secret.txt" not in landed and "passwd.txt" not in landed and "more.txt" not in landed


def test_fm_land_prints_what_it_did_not_land(src, tmp_path):
    env = {**os.environ, "FM_ROOT": str(tmp_path / "root")}
    out = subprocess.run(
        [sys.executable, "-m", "fm_assets.cli.main", "land", str(src), "--source", "s", "--license", "MIT"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "not landed: 7 path(s)" in out.stderr
    assert "passwd.txt -> " in out.stderr and "symlink_outside_source" in out.stderr


def test_a_folder_of_only_skipped_paths_is_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / ".hidden.jsonl").write_text("{}\n")
    with pytest.raises(LandingError, match=r"holds no files to land \(1 skipped: hidden\)"):
        land_batch(ObjectStore(str(tmp_path / "r")), src, source="s", license_id="MIT", namespace="cloud")


def test_manifest_edited_after_landing_is_refused(src, tmp_path):
    store = ObjectStore(str(tmp_path / "root"))
    land_batch(store, src, source="s", license_id="MIT", namespace="on_device", batch_id="b1")
    path = tmp_path / "root" / "landing" / "b1" / "_batch.json"
    path.write_text(path.read_text().replace('"on_device"', '"cloud"'))
    landed = (tmp_path / "root" / "landing" / "b1" / "_batch.sha256").read_text().strip()
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(LandingError, match=r"was changed after landing.*immutable") as err:
        read_batch_manifest(store, "b1")
    assert "batch b1" in str(err.value) and landed in str(err.value) and actual in str(err.value)
    assert "new batch" in str(err.value)
    with pytest.raises(LandingError, match=r"batch b1: .* was changed after landing"):  # what fm run hits
        LAND.side_inputs(StageContext(store, "b1", PipelineConfigResource(progress=False)))


def test_legacy_batch_without_hash_still_reads(src, tmp_path, caplog):
    store = ObjectStore(str(tmp_path / "root"))
    land_batch(store, src, source="s", license_id="MIT", namespace="cloud", batch_id="b1")
    (tmp_path / "root" / "landing" / "b1" / "_batch.sha256").unlink()
    assert read_batch_manifest(store, "b1").license == "MIT"
    assert "cannot be verified" in caplog.text


def test_fifos_and_sockets_are_recorded_not_read(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.jsonl").write_text(json.dumps({"text": "x"}) + "\n")
    os.mkfifo(src / "pipe.jsonl")  # reading it would block landing forever
    files, skipped = select_source_files(src)
    assert [f.rel for f in files] == ["good.jsonl"]
    assert skipped == [{"path": "pipe.jsonl", "reason": "not_a_regular_file"}]


def test_a_file_swapped_for_a_link_after_the_walk_is_refused_not_followed(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("root:x:0:0\n")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("aaaaaaaaaa\n")
    (src / "sub" / "b.txt").write_text("bbbbbbbbbb\n")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "b.txt").write_text("outside b.\n")
    a, b = select_source_files(src)[0]
    (src / "a.txt").unlink()
    (src / "a.txt").symlink_to(outside)  # the last component becomes a link
    with pytest.raises(LandingError, match=r"a.txt changed while landing.*fm land again"):
        _hash_walked(a)
    (src / "sub" / "b.txt").unlink()
    (src / "sub").rmdir()
    (src / "sub").symlink_to(tmp_path / "elsewhere")  # a folder on the way becomes a link
    with pytest.raises(LandingError, match=r"b.txt changed while landing"):
        _hash_walked(b)


def test_a_consistent_edit_of_manifest_and_hash_changes_the_land_key(src, tmp_path):
    """Even an edit that rewrites the sidecar too is never half-applied: land keys on the manifest's hash, so
    its records are rebuilt with the new licence instead of a cache hit carrying the old one."""
    store = ObjectStore(str(tmp_path / "root"))
    land_batch(store, src, source="s", license_id="MIT", namespace="cloud", batch_id="b1")
    ctx = StageContext(store, "b1", PipelineConfigResource(progress=False))
    before = LAND.side_inputs(ctx).versions
    folder = tmp_path / "root" / "landing" / "b1"
    body = (folder / "_batch.json").read_bytes().replace(b'"MIT"', b'"Apache-2.0"')
    (folder / "_batch.json").write_bytes(body)
    (folder / "_batch.sha256").write_text(hashlib.sha256(body).hexdigest() + "\n")
    after = LAND.side_inputs(ctx).versions
    assert before["landing"] == after["landing"]  # same files
    assert before["manifest"] != after["manifest"]


def test_fm_land_summary_is_bounded_and_says_how_many_more(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.jsonl").write_text(json.dumps({"text": "x"}) + "\n")
    for i in range(25):
        (src / f".hidden-{i:02d}").write_text("x")
    env = {**os.environ, "FM_ROOT": str(tmp_path / "root")}
    out = subprocess.run(
        [sys.executable, "-m", "fm_assets.cli.main", "land", str(src), "--source", "s", "--license", "MIT"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "not landed: 25 path(s) (25 hidden)" in out.stderr
    assert ".hidden-19: hidden" in out.stderr and ".hidden-20" not in out.stderr
    assert "... and 5 more" in out.stderr
    batch = out.stdout.strip()
    assert len(read_batch_manifest(ObjectStore(str(tmp_path / "root")), batch).skipped) == 25
