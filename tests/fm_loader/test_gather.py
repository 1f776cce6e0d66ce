"""The whole-batch gather and fill: same batches on every path (pieces under max_open, chunked fill, re-read
after a bad read), the stream's range lookup, and the fast manifest load."""

from __future__ import annotations

import gc
import hashlib
import json
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loader_helpers import collect, make_dataset

from fm_loader import CorruptRowError, CorruptShardError, DatasetManifest, Loader, ShardEntry, batching
from fm_loader.format import decode_index
from fm_loader.order import SourceOrder
from fm_loader.sources import TarShardRows


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(str(tmp_path_factory.mktemp("gather")), [37, 5, 61, 20, 44, 13], seq_len=16)


def batches(path: str, **options) -> list[dict[str, torch.Tensor]]:
    return [{k: v.clone() for k, v in b.items()} for b in Loader(path, **{"prefetch": 0, **options})]


def assert_same(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert list(x) == list(y) == list(batching.BATCH_KEYS)
        for key in x:
            assert x[key].dtype == y[key].dtype and torch.equal(x[key], y[key]), key


def test_batches_touching_more_shards_than_max_open_are_gathered_in_pieces(dataset):
    reference = batches(dataset, global_batch_size=24, epochs=2)
    loader = Loader(dataset, global_batch_size=24, epochs=2, prefetch=0)
    loader._assembler.max_open = 2
    got = []
    for batch in loader:
        assert len(loader._assembler._open) <= 2
        got.append({k: v.clone() for k, v in batch.items()})
    assert_same(got, reference)


def test_chunked_fill_gives_the_same_batches(dataset, monkeypatch):
    reference = batches(dataset, global_batch_size=30, input_ids_dtype=torch.int64)
    monkeypatch.setattr(batching, "CHUNK_TOKENS", 16 * 4)  # four rows of 16 tokens per chunk
    chunked = Loader(dataset, global_batch_size=30, input_ids_dtype=torch.int64, prefetch=0)
    assert "segment_ids" in chunked._assembler._pool(30).shapes
    assert_same([{k: v.clone() for k, v in b.items()} for b in chunked], reference)


def test_a_bad_read_of_a_good_file_is_read_again_and_recovered(tmp_path, monkeypatch):
    path = make_dataset(str(tmp_path), [12, 9], seq_len=24)
    reference = batches(path, global_batch_size=7)
    manifest = DatasetManifest.load(path)
    entry = manifest.shards[1]
    tar = Path(manifest.shard_uri(entry))
    index = decode_index(Path(manifest.index_uri(entry)).read_bytes())
    good = tar.read_bytes()
    start = int(index.records[4]["tokens_offset"])
    bad = bytearray(good)
    bad[start] ^= 0x10
    tar.write_bytes(bytes(bad))  # the memory map sees the flipped bit ...
    rereads = []

    def reread(self: TarShardRows, offset: int, nbytes: int) -> bytes:
        rereads.append((self.label, offset))
        return good[offset : offset + nbytes]  # ... and the read that bypasses it sees the right bytes

    monkeypatch.setattr(TarShardRows, "reread", reread)
    assert_same(batches(path, global_batch_size=7), reference)
    assert rereads == [(str(tar), start)]
    monkeypatch.undo()
    with pytest.raises(CorruptRowError) as err:  # when the file itself is bad the row is reported
        collect(Loader(path, global_batch_size=7))
    assert err.value.row == 4 and err.value.shard == str(tar)


def test_skipped_corrupt_rows_become_padding_in_every_piece(tmp_path):
    path = make_dataset(str(tmp_path), [12, 9, 10], seq_len=24)
    manifest = DatasetManifest.load(path)
    for shard, row in ((0, 3), (2, 7)):
        entry = manifest.shards[shard]
        tar = Path(manifest.shard_uri(entry))
        offset = int(decode_index(Path(manifest.index_uri(entry)).read_bytes()).records[row]["tokens_offset"])
        data = bytearray(tar.read_bytes())
        data[offset + 1] ^= 1
        tar.write_bytes(bytes(data))
    loader = Loader(path, global_batch_size=8, skip_corrupt=True, prefetch=0)
    loader._assembler.max_open = 1
    ids = [s for s in collect(loader) if s >= 0]
    offsets = np.cumsum([0] + [s.rows for s in manifest.shards])
    assert len(ids) == 31 - 2 and loader.metrics()["corrupt_rows_skipped"] == 2
    assert int(offsets[0] + 3) not in ids and int(offsets[2] + 7) not in ids


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    shard_rows=st.lists(st.integers(1, 300), min_size=1, max_size=30),
    window=st.integers(1, 2000),
    seed=st.integers(0, 5),
    start=st.integers(0, 20_000),
    count=st.integers(0, 3000),
)
def test_locate_range_agrees_with_locate(shard_rows, window, seed, start, count):
    order = SourceOrder(np.array(shard_rows), seed=seed, source_index=seed % 3, window_rows=window)
    shards, rows = order.locate(np.arange(start, start + count))
    got_shards, got_rows, got_ids = order.locate_range(start, count)
    assert np.array_equal(got_shards, shards) and np.array_equal(got_rows, rows)
    assert np.array_equal(got_ids, np.concatenate([[0], np.cumsum(shard_rows)])[shards] + rows)


def test_stream_fingerprint_is_unchanged_and_computed_lazily(dataset):
    loader = Loader(dataset, global_batch_size=4)
    assert "fingerprint" not in vars(loader.stream)  # not paid at start
    manifest = DatasetManifest.load(dataset)
    h = hashlib.sha256()  # the fingerprint as fm_loader has always computed it (states stay valid)
    h.update(f"{manifest.schema_fingerprint}|{manifest.seq_len}|{manifest.vocab_size}".encode())
    for s in manifest.shards:
        h.update(f"|{s.sha256}:{s.rows}".encode())
    source = h.hexdigest()[:16]
    stream = hashlib.sha256(f"stream/1|0|8192|{[manifest.rows]}".encode())
    stream.update(source.encode())
    assert loader.state_dict()["fingerprint"] == stream.hexdigest()[:16]


def test_loader_start_opens_no_shard(tmp_path):
    entries = [ShardEntry(f"missing/{i:05d}.tar", f"{i:064x}", 100, 100 * 16) for i in range(2000)]
    DatasetManifest("m", "v1", 16, 1000, "t", "c", entries).save(str(tmp_path / "manifest.json"))
    loader = Loader(str(tmp_path / "manifest.json"), global_batch_size=8)
    refs = loader.stream.rows(0, 0, 8)  # the plan needs no shard
    assert len(set(refs.shard.tolist())) > 1
    with pytest.raises(CorruptShardError, match="missing or unreadable"):
        next(iter(loader))


def test_fast_manifest_load_builds_the_same_entries_and_restores_gc(tmp_path):
    path = make_dataset(str(tmp_path / "ds"), [5, 7])
    doc = json.loads(Path(path).read_text())
    loaded = DatasetManifest.from_json(json.dumps(doc))
    expected = [ShardEntry(**s) for s in doc["shards"]]
    assert loaded.shards == expected and [hash(e) for e in loaded.shards] == [hash(e) for e in expected]
    with pytest.raises(FrozenInstanceError):
        loaded.shards[0].rows = 3  # type: ignore[misc]
    old = {k: v for k, v in doc["shards"][0].items() if k in ("path", "sha256", "rows", "tokens")}
    mixed = DatasetManifest.from_json(json.dumps({**doc, "shards": [old, doc["shards"][1]]}))
    assert mixed.shards[0] == ShardEntry(**old) and mixed.shards[0].index_path == ""
    with pytest.raises(TypeError):
        DatasetManifest.from_json(json.dumps({**doc, "shards": [{**doc["shards"][0], "new_field": 1}]}))
    assert gc.isenabled()
    gc.disable()
    try:
        DatasetManifest.from_json(json.dumps(doc))
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()
