"""Per-token extra columns: stored in format-3 shards, filled where a source lacks them, never a key change."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from loader_helpers import make_dataset, random_rows

from fm_loader import CorruptRowError, DatasetManifest, Loader, PackedRow, ShardEntry, encode_shard
from fm_loader.batching import BATCH_KEYS, SOURCE_SHIFT
from fm_loader.format import decode_index
from fm_loader.verify import verify_dataset

SEQ, VOCAB = 32, 1000


def columned_rows(seed: int, count: int) -> list[PackedRow]:
    """Rows whose ``depth`` is token + 1 (so alignment with input_ids is checkable) and ``chunk`` the 1-based
    document index inside the row."""
    rows = random_rows(np.random.default_rng(seed), count, SEQ, VOCAB, "c")
    for row in rows:
        tokens = np.asarray(row.tokens, np.int64)
        chunk = np.repeat(np.arange(1, len(row.doc_lens) + 1), row.doc_lens)
        row.columns = {"depth": tokens + 1, "chunk": chunk}
    return rows


def write_columned(folder: str, shard_rows: list[int], name: str = "code") -> str:
    os.makedirs(folder, exist_ok=True)
    entries = []
    for s, count in enumerate(shard_rows):
        enc = encode_shard(columned_rows(s, count), f"{name}-{s:04d}", SEQ, VOCAB)
        for file_name, data in enc.files.items():
            with open(os.path.join(folder, file_name), "wb") as f:
                f.write(data)
        entries.append(ShardEntry.from_info(enc.info))
    path = os.path.join(folder, "manifest.json")
    DatasetManifest(name, "v1", SEQ, VOCAB, "tok-test", "test", entries).save(path)
    return path


@pytest.fixture
def mixture(tmp_path):
    code = write_columned(str(tmp_path / "code"), [7, 9, 5])
    text = make_dataset(str(tmp_path / "text"), [8, 8], seq_len=SEQ, vocab=VOCAB, name="text")
    return {"sources": [{"manifest": code}, {"manifest": text}]}


def check_batch(batch: dict[str, torch.Tensor], fills: dict[str, int]) -> tuple[int, int]:
    """Assert the columns' shapes, alignment and fills; returns (rows with columns, rows without)."""
    assert list(batch) == [*BATCH_KEYS, *fills]
    ids = batch["input_ids"].numpy().astype(np.int64)
    with_cols = without = 0
    pairs = zip(batch["sample_ids"].tolist(), batch["valid_token_count"].tolist(), strict=True)
    for b, (sample, n) in enumerate(pairs):
        depth, chunk = batch["depth"][b].numpy(), batch["chunk"][b].numpy()
        assert depth.dtype == np.int32 and depth.shape == (SEQ,)
        if sample >= 0 and sample >> SOURCE_SHIFT == 0:  # the source that stores the columns
            with_cols += 1
            assert np.array_equal(depth[:n], ids[b, :n] + 1)
            assert np.array_equal(chunk[:n], batch["segment_ids"][b, :n].numpy())
            assert (depth[n:] == fills["depth"]).all() and (chunk[n:] == fills["chunk"]).all()
        else:
            without += 1
            assert (depth == fills["depth"]).all() and (chunk == fills["chunk"]).all()
    return with_cols, without


def test_columns_follow_their_tokens_and_sources_without_them_get_the_fill(mixture):
    fills = {"depth": -1, "chunk": 0}
    loader = Loader(mixture, global_batch_size=8, extra_columns=fills)
    counts = np.array([check_batch(batch, fills) for batch in loader]).sum(axis=0)
    assert counts.tolist()[0] == 21 and counts.sum() >= 21 + 16  # every row of both sources, plus padding


def test_the_stream_is_the_same_with_or_without_columns(mixture):
    plain = [b["sample_ids"].tolist() for b in Loader(mixture, global_batch_size=8)]
    enriched = [
        b["sample_ids"].tolist() for b in Loader(mixture, global_batch_size=8, extra_columns={"depth": 0})
    ]
    assert plain == enriched


@pytest.mark.slow
def test_columns_come_through_worker_processes(mixture):
    fills = {"depth": -1, "chunk": 7}
    single = [b for b in Loader(mixture, global_batch_size=8, extra_columns=fills, prefetch=0)]
    workers = list(Loader(mixture, global_batch_size=8, extra_columns=fills, num_workers=2))
    assert len(single) == len(workers)
    for a, b in zip(single, workers, strict=True):
        check_batch(b, fills)
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_column_no_source_stores_is_all_fill_and_bad_requests_are_refused(mixture):
    batch = next(iter(Loader(mixture, global_batch_size=4, extra_columns={"absent": 5})))
    assert batch["absent"].shape == (4, SEQ) and (batch["absent"] == 5).all()
    with pytest.raises(ValueError, match="built-in batch key"):
        Loader(mixture, global_batch_size=4, extra_columns={"labels": 0})
    with pytest.raises(ValueError, match="int32 integer"):
        Loader(mixture, global_batch_size=4, extra_columns={"depth": 2**40})
    with pytest.raises(ValueError, match="int32 integer"):
        Loader(mixture, global_batch_size=4, extra_columns={"depth": 0.5})  # pyright: ignore[reportArgumentType]


def test_damaged_column_bytes_are_caught_by_the_loader_and_by_verify(tmp_path):
    path = write_columned(str(tmp_path / "code"), [6])
    manifest = DatasetManifest.load(path)
    tar = manifest.shard_uri(manifest.shards[0])
    with open(manifest.index_uri(manifest.shards[0]), "rb") as f:
        index = decode_index(f.read())
    assert index.column_records is not None
    offset = int(index.column_records[2]["columns_offset"])
    with open(tar, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptRowError, match=r"row 2 .*per-token columns"):
        for _ in Loader(path, global_batch_size=6, extra_columns={"depth": 0}, prefetch=0):
            pass
    # the tokens are intact: a loader that does not ask for the columns reads every row
    assert sum(1 for b in Loader(path, global_batch_size=6, prefetch=0) for _ in b["sample_ids"]) == 6
    problems = verify_dataset(path).problems
    assert {p.row for p in problems if p.row is not None} == {2}  # and the shard sha256


def test_rows_of_one_shard_must_carry_the_same_columns():
    rows = columned_rows(0, 2)
    rows[1].columns = {"depth": np.ones(len(rows[1].tokens), np.int64)}
    with pytest.raises(ValueError, match="row 1 has columns \\['depth'\\]"):
        encode_shard(rows, "s", SEQ, VOCAB)
    rows = columned_rows(0, 1)
    rows[0].columns = {"depth": np.ones(len(rows[0].tokens) + 1, np.int64)}
    with pytest.raises(ValueError, match="'depth' has"):
        encode_shard(rows, "s", SEQ, VOCAB)
