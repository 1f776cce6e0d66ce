"""Shard format: reproducible bytes, row index, peer readers (webdataset) agree byte for byte."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds
from loader_helpers import make_dataset, random_rows

from fm_loader import DatasetManifest, PackedRow, ShardEntry, encode_shard, read_rows
from fm_loader.format import decode_index, decode_row


def test_identical_rows_give_identical_bytes_and_tar_metadata_is_neutral():
    rows = random_rows(np.random.default_rng(1), 20, 64, 70000, "x")
    a = encode_shard(rows, "shard-000003", 64, 70000)
    b = encode_shard(rows, "shard-000003", 64, 70000)
    assert a.files == b.files and a.info == b.info
    assert set(a.files) == {"shard-000003.tar", "shard-000003.idx"}
    with tarfile.open(fileobj=io.BytesIO(a.files["shard-000003.tar"])) as tar:
        members = tar.getmembers()
    assert [m.name for m in members[:3]] == [
        f"shard-000003/00000000.{ext}" for ext in ("doclens", "json", "tokens")
    ]
    assert all(m.mtime == 0 and m.uid == 0 and m.uname == "" for m in members)
    assert a.info.rows == 20 and a.info.tokens == sum(len(r.tokens) for r in rows)


def test_uint32_tokens_for_large_vocab_and_row_roundtrip():
    rows = [PackedRow(np.array([70000, 5, 65535]), [2, 1], ["a:0", "a:1"])]
    enc = encode_shard(rows, "s", 8, 100000)
    index = decode_index(enc.files["s.idx"])
    assert index.token_itemsize == 4
    got = decode_row(enc.files["s.tar"], index, 0)
    assert (
        got.tokens.tolist() == [70000, 5, 65535] and got.doc_lens == [2, 1] and got.doc_ids == ["a:0", "a:1"]
    )


@pytest.mark.parametrize(
    "row",
    [
        PackedRow(np.arange(10), [5, 4]),
        PackedRow(np.arange(40), [40]),
        PackedRow(np.array([1, 2000]), [2]),
        PackedRow(np.arange(4), [2, 2], ["only-one"]),
    ],
)
def test_invalid_rows_are_refused(row):
    with pytest.raises(ValueError):
        encode_shard([row], "s", 32, 1000)


def test_webdataset_reads_every_sample_byte_exact(tmp_path):
    rows = random_rows(np.random.default_rng(2), 30, 48, 1000, "w")
    enc = encode_shard(rows, "shard-000000", 48, 1000)
    path = tmp_path / "shard-000000.tar"
    path.write_bytes(enc.files["shard-000000.tar"])
    samples = list(wds.WebDataset(str(path), shardshuffle=False))
    assert len(samples) == len(rows)
    for i, (sample, row) in enumerate(zip(samples, rows, strict=True)):
        assert sample["__key__"] == f"shard-000000/{i:08d}"
        assert sample["tokens"] == np.asarray(row.tokens, dtype="<u2").tobytes()
        assert sample["doclens"] == np.asarray(row.doc_lens, dtype="<i4").tobytes()
        meta = json.loads(sample["json"])
        assert meta["doc_ids"] == list(row.doc_ids) and meta["n_tokens"] == len(row.tokens)


def test_manifest_roundtrip_relative_paths_and_read_rows(tmp_path):
    path = make_dataset(str(tmp_path / "ds"), [5, 7])
    manifest = DatasetManifest.load(path)
    assert manifest.rows == 12 and manifest.shards[0].path == "shards/shard-000000.tar"
    assert DatasetManifest.from_json(manifest.to_json()).to_json() == manifest.to_json()
    assert manifest.shard_uri(manifest.shards[1]) == str(tmp_path / "ds" / "shards" / "shard-000001.tar")
    # A manifest elsewhere that points into the dataset folder with ../ paths.
    other = DatasetManifest(
        "rel", "v2", manifest.seq_len, manifest.vocab_size, "tok-test", "c",
        [ShardEntry(**{**e.__dict__, "path": "../ds/" + e.path, "index_path": "../ds/" + e.index_path})
         for e in manifest.shards],
    )  # fmt: skip
    other.save(str(tmp_path / "release" / "manifest.json"))
    got = list(read_rows(str(tmp_path / "release" / "manifest.json")))
    assert [(name, idx) for _, name, idx in got][:6] == [("shard-000000", i) for i in range(5)] + [
        ("shard-000001", 0)
    ]
    assert len(list(read_rows(path, limit=3))) == 3
    assert os.path.exists(tmp_path / "release" / "manifest.json")


def test_manifest_with_foreign_schema_fingerprint_is_refused(tmp_path):
    path = make_dataset(str(tmp_path), [3])
    doc = json.loads(Path(path).read_text())
    doc["schema_fingerprint"] = "0" * 16
    with pytest.raises(ValueError, match="schema fingerprint"):
        DatasetManifest.from_json(json.dumps(doc))
