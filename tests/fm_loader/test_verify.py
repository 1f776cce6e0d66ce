"""Every byte of every sample is under a checksum: damage in a member fm_loader itself never reads (the
.json member, a tar header, the end blocks) is what webdataset and Energon readers would get, so
``fm_loader.verify`` must find it, per row, and report every problem rather than the first."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest
import xxhash
from loader_helpers import make_dataset

import fm_loader
from fm_loader import read_rows
from fm_loader.format import (
    _INDEX_HEADER,
    FLAG_SAMPLE_CHECKSUMS,
    INDEX_RECORD_DTYPE,
    decode_index,
    schema_fingerprint,
)
from fm_loader.manifest import DatasetManifest
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


def _as_format_version_1(manifest_path: str) -> None:
    """Rewrite a dataset as fm_loader format 1 wrote it: version 1 headers, no flags, zeroed sample checksums."""

    doc = json.loads(Path(manifest_path).read_text())
    for entry in doc["shards"]:
        idx = Path(os.path.dirname(manifest_path), entry["index_path"])
        body = bytearray(idx.read_bytes()[:-8])
        magic, _, itemsize, seq_len, _, vocab, rows = _INDEX_HEADER.unpack_from(body, 0)
        _INDEX_HEADER.pack_into(body, 0, magic, 1, itemsize, seq_len, 0, vocab, rows)
        end = _INDEX_HEADER.size + rows * INDEX_RECORD_DTYPE.itemsize
        records = np.frombuffer(body[_INDEX_HEADER.size : end], INDEX_RECORD_DTYPE).copy()
        records["sample_checksum"] = 0
        body[_INDEX_HEADER.size : end] = records.tobytes()
        data = bytes(body) + struct.pack("<Q", xxhash.xxh3_64_intdigest(bytes(body)))
        idx.write_bytes(data)
        entry["index_sha256"] = hashlib.sha256(data).hexdigest()
    doc["format_version"] = 1
    doc["schema_fingerprint"] = schema_fingerprint(doc["vocab_size"], 1)
    Path(manifest_path).write_text(json.dumps(doc))


def test_format_version_1_datasets_still_load_and_verify_tokens_only(dataset):

    before = [row.tokens.tolist() for row, _, _ in read_rows(DatasetManifest.load(dataset))]
    _as_format_version_1(dataset)
    manifest = DatasetManifest.load(dataset)
    assert manifest.format_version == 1
    assert [row.tokens.tolist() for row, _, _ in read_rows(manifest)] == before
    report = verify_dataset(dataset)
    assert report.ok and report.unchecked_members == 2, report.problems
    tar_path = os.path.join(os.path.dirname(dataset), SHARD)
    _flip(tar_path, _member_offset(tar_path, ".tokens", 1) + 1)
    assert (SHARD, 1) in {(p.shard, p.row) for p in verify_dataset(dataset).problems}


def test_unknown_format_version_is_refused_with_the_fix(dataset):

    doc = json.loads(Path(dataset).read_text())
    doc["format_version"] = 9
    Path(dataset).write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"format version 9.*upgrade fm_loader"):
        verify_dataset(dataset)


def test_top_level_names():

    assert fm_loader.verify_dataset is verify_dataset
    assert fm_loader.VerifyReport().ok
