"""Every byte of every sample is under a checksum: damage in a member fm_loader itself never reads (the
.json member, a tar header, the end blocks) is what webdataset and Energon readers would get, so
``fm_loader.verify`` must find it, per row, and report every problem rather than the first."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest
from loader_helpers import make_dataset

from fm_loader.format import FLAG_SAMPLE_CHECKSUMS, decode_index
from fm_loader.verify import verify_dataset

SHARD = os.path.join("shards", "shard-000000.tar")


@pytest.fixture
def dataset(tmp_path) -> str:
    return make_dataset(str(tmp_path), [6, 5], seq_len=32)


def _member_offset(tar_path: str, suffix: str, row: int) -> int:
    with tarfile.open(tar_path) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith(suffix)]
        return members[row].offset_data


def _flip(path: str, at: int) -> None:
    file = Path(path)
    data = bytearray(file.read_bytes())
    data[at] ^= 0x20
    file.write_bytes(bytes(data))


def test_clean_dataset_verifies(dataset):
    report = verify_dataset(dataset)
    assert report.ok and report.shards == 2 and report.rows == 11 and report.unchecked_members == 0


@pytest.mark.parametrize(
    ("where", "row"),
    [("json", 2), ("doclens", 4), ("header", 1), ("tokens", 3)],
)
def test_damage_in_any_member_is_found_with_its_row(dataset, where, row):
    tar_path = os.path.join(os.path.dirname(dataset), SHARD)
    if where == "header":
        offset = _member_offset(tar_path, ".json", row) - 512 + 100  # the member's mode field in its header
    else:
        offset = _member_offset(tar_path, f".{where}", row) + 1
    _flip(tar_path, offset)
    report = verify_dataset(dataset)
    rows = {(p.shard, p.row) for p in report.problems if p.row is not None}
    assert (SHARD, row) in rows, report.problems
    assert any("sha256 differs" in p.what for p in report.problems)


def test_webdataset_style_readers_would_get_the_damaged_json(dataset):
    """The attack is real: a plain tar reader returns the flipped .json bytes without complaint."""
    tar_path = os.path.join(os.path.dirname(dataset), SHARD)
    _flip(tar_path, _member_offset(tar_path, ".json", 0) + 1)
    with tarfile.open(tar_path) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".json"))
        payload = tar.extractfile(member).read()  # type: ignore[union-attr]
    assert payload[:2] != b'{"'
    assert not verify_dataset(dataset).ok


def test_every_problem_is_reported_and_missing_files_do_not_raise(dataset):
    folder = os.path.dirname(dataset)
    tar_path = os.path.join(folder, SHARD)
    _flip(tar_path, _member_offset(tar_path, ".json", 0) + 1)
    _flip(tar_path, _member_offset(tar_path, ".json", 5) + 1)
    os.remove(os.path.join(folder, "shards", "shard-000001.tar"))
    report = verify_dataset(dataset)
    assert {p.row for p in report.problems if p.shard == SHARD and p.row is not None} == {0, 5}
    assert any("missing" in p.what and "shard-000001" in p.shard for p in report.problems)


def test_indexes_carry_the_flag(dataset):
    idx = os.path.join(os.path.dirname(dataset), "shards", "shard-000000.idx")
    assert decode_index(Path(idx).read_bytes()).flags & FLAG_SAMPLE_CHECKSUMS
