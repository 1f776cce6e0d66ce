"""Landing reads nothing outside SRC, skips hidden paths by one rule and says so, and a manifest edited after
landing is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fm_assets.engine.landing import LandingError, land_batch, read_batch_manifest, select_source_files
from fm_assets.engine.store import ObjectStore


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
    assert [rel for _, rel in files] == ["docs/good.jsonl"]
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
    with pytest.raises(LandingError, match=r"was changed after landing.*immutable"):
        read_batch_manifest(store, "b1")


def test_legacy_batch_without_hash_still_reads(src, tmp_path, caplog):
    store = ObjectStore(str(tmp_path / "root"))
    land_batch(store, src, source="s", license_id="MIT", namespace="cloud", batch_id="b1")
    (tmp_path / "root" / "landing" / "b1" / "_batch.sha256").unlink()
    assert read_batch_manifest(store, "b1").license == "MIT"
    assert "cannot be verified" in caplog.text
