"""A hostile operator damages committed bytes; nothing built on them may pass silently.

Each case damages one kind of intermediate, then checks what a user sees: `fm verify` names the damage and
its repair, a run that reuses or reads the damaged file fails naming it (or, for same-size damage that only
content hashes can see, `fm run --verify` does), and `fm repair` restores byte-identical outputs.
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import Root, flip_bit

from fm_assets.engine import layout
from fm_assets.engine.refs import read_success

pytestmark = [pytest.mark.slow]


def _assert_verify_finds(root: Root, needle: str) -> None:
    verify = root.fm("verify")
    assert verify.returncode == 1, verify.stderr
    assert needle in verify.stdout and "repair:" in verify.stdout, verify.stdout + verify.stderr  # the result


def _assert_repaired(root: Root, before: dict[str, str], *args: str) -> None:
    repair = root.fm("repair", root.batch, *args)
    assert repair.returncode == 0, repair.stderr[-3000:]
    assert "data version unchanged" in repair.stdout, repair.stdout + repair.stderr
    assert root.versions() == before
    verify = root.fm("verify")
    assert verify.returncode == 0, verify.stderr
    assert "no damage found" in verify.stdout


def test_clean_root_verifies(root: Root) -> None:
    verify = root.fm("verify", "--json")
    assert verify.returncode == 0, verify.stderr
    assert '"ok": true' in verify.stdout
    assert root.fm("run").returncode == 0  # every stage a cache hit, and the hits re-checked their files


@pytest.mark.parametrize(
    ("stage", "pattern"),
    [("normalize", "part-*.parquet"), ("tokenize", "part-*.parquet"), ("shard", "*.tar"), ("shard", "*.idx")],
)
def test_same_size_bit_flip_caught_by_full_verification(root: Root, stage: str, pattern: str) -> None:
    before = root.versions()
    damaged = root.output_file(stage, pattern)
    flip_bit(damaged)
    _assert_verify_finds(root, damaged.name)
    run = root.fm("run", "--verify")
    assert run.returncode == 1
    assert damaged.name in run.stderr and f"fm repair {root.batch} --stage {stage}" in run.stderr, run.stderr
    _assert_repaired(root, before, "--stage", stage)


@pytest.mark.parametrize(("stage", "pattern"), [("tokenize", "part-*.parquet"), ("shard", "*.tar")])
def test_truncated_or_deleted_file_fails_the_cache_hit(root: Root, stage: str, pattern: str) -> None:
    before = root.versions()
    damaged = root.output_file(stage, pattern)
    if pattern.endswith(".tar"):
        damaged.unlink()
    else:
        damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    audit = json.loads(root.fm("audit", "--json").stdout)  # stored check outcomes no longer pass alone
    assert not audit["all_checks_passed"] and not audit["integrity"]["ok"]
    assert any(damaged.name in f["path"] for f in audit["integrity"]["findings"])
    run = root.fm("run")  # the plain run: cache hits check presence and sizes
    assert run.returncode == 1
    assert damaged.name in run.stderr and "fm repair" in run.stderr, run.stderr
    _assert_repaired(root, before)  # no --stage: repair finds the damaged stage itself


def test_damaged_upstream_stops_the_stage_reading_it(root: Root) -> None:
    """A flipped bit in normalize's output, then decontaminate recomputes: it must refuse to read it."""
    before = root.versions()
    damaged = root.output_file("normalize", "part-*.parquet")
    flip_bit(damaged)
    decontaminate = read_success(root.store, "decontaminate", root.batch)
    shutil.rmtree(root.path / decontaminate.prefix)  # its output is gone: the next run recomputes it
    shard_before = sorted(p.name for p in (root.path / "stages" / "shard").rglob("*.tar"))
    run = root.fm("run")
    assert run.returncode == 1
    assert damaged.name in run.stderr, run.stderr
    assert f"fm repair {root.batch} --stage normalize" in run.stderr, run.stderr
    assert sorted(p.name for p in (root.path / "stages" / "shard").rglob("*.tar")) == shard_before
    _assert_repaired(root, before, "--stage", "normalize")
    assert root.fm("run").returncode == 0
    assert root.versions() == before


def test_damaged_cas_object_is_found_and_restored(root: Root) -> None:
    objects = sorted((root.path / "cas").rglob("*"))
    victim = next(p for p in objects if p.is_file())
    good = victim.read_bytes()
    flip_bit(victim)
    _assert_verify_finds(root, victim.name)
    repair = root.fm("repair", "--cas")
    assert repair.returncode == 0, repair.stderr
    assert victim.read_bytes() == good
    assert root.fm("verify").returncode == 0


def test_damaged_unit_marker_is_repaired(root: Root) -> None:
    before = root.versions()
    prefix = read_success(root.store, "filter", root.batch).prefix
    marker = sorted((root.path / prefix / "_units").glob("*.json"))[0]
    marker.write_text(marker.read_text()[:-20])
    _assert_verify_finds(root, marker.name)
    _assert_repaired(root, before, "--stage", "filter")
    assert (root.path / layout.success_marker(prefix)).exists()


def test_damaged_json_member_of_a_released_shard_is_located_to_its_row(root: Root) -> None:
    import tarfile

    shard = root.output_file("shard", "*.tar")
    with tarfile.open(shard) as tar:
        member = [m for m in tar.getmembers() if m.name.endswith(".json")][1]
    flip_bit(shard, member.offset_data + 3)
    verify = root.fm("verify")
    assert verify.returncode == 1
    assert "row 1: sample bytes" in verify.stdout and shard.name in verify.stdout, verify.stdout
