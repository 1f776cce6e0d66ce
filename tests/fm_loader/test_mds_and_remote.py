"""MosaicML MDS sources (fixture written by MDSWriter), remote shards through the cache, Energon."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import fsspec
import numpy as np
import pytest
from loader_helpers import collect, make_dataset

from fm_loader import Loader
from fm_loader.storage import ShardCache

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mds")


def test_mds_token_column_read_in_place_matches_what_mdswriter_wrote():
    expected = json.loads(Path(os.path.join(FIXTURE, "tokens_expected.json")).read_text())
    spec = {"sources": [{"mds": os.path.join(FIXTURE, "tokens"), "seq_len": 32, "vocab_size": 1000}]}
    loader = Loader(spec, global_batch_size=8)
    seen = {}
    for batch in loader:
        for b, sid in enumerate(batch["sample_ids"].tolist()):
            if sid >= 0:
                n = int(batch["valid_token_count"][b])
                seen[sid] = batch["input_ids"][b, :n].tolist()
                assert int(batch["num_docs"][b]) == 1
    assert [seen[i] for i in range(len(expected))] == expected


def test_mds_mixed_with_our_shards_in_one_yaml(tmp_path):
    ours = make_dataset(str(tmp_path / "ours"), [20, 20], seq_len=32, tokenizer_hash="t1")
    (tmp_path / "mix.yaml").write_text(
        f"sources:\n  - manifest: {ours}\n    weight: 2\n"
        f"  - mds: {os.path.join(FIXTURE, 'tokens')}\n    weight: 1\n    seq_len: 32\n    vocab_size: 1000\n"
        "    tokenizer_hash: t1\nepoch_rows: 60\n"
    )
    ranks = [Loader(str(tmp_path / "mix.yaml"), global_batch_size=6, rank=r, world_size=3) for r in range(3)]
    merged = [
        s
        for step in zip(*[list(r) for r in ranks], strict=True)
        for b in step
        for s in b["sample_ids"].tolist()
    ]
    assert [s >> 48 for s in merged].count(1) == 20 and len(merged) == 60


def test_mds_text_tokenized_and_packed_on_the_fly_is_deterministic_and_resumable(tmp_path):
    spec = {
        "sources": [
            {
                "mds": os.path.join(FIXTURE, "text"),
                "text_column": "text",
                "tokenizer": os.path.join(FIXTURE, "tokenizer.json"),
                "seq_len": 48,
                "eos_token_id": 1,
            }
        ]
    }
    cache = str(tmp_path / "cache")
    full = [s for s in collect(Loader(spec, global_batch_size=4, cache_dir=cache)) if s >= 0]
    loader = Loader(spec, global_batch_size=4, cache_dir=cache)
    it = iter(loader)
    first = [next(it) for _ in range(2)]
    state = loader.state_dict()
    again = Loader(spec, global_batch_size=4, cache_dir=cache)
    again.load_state_dict(state)
    rest = [s for s in collect(again) if s >= 0]
    assert [s for b in first for s in b["sample_ids"].tolist()] + rest == full
    text = json.loads(Path(os.path.join(FIXTURE, "text_expected.json")).read_text())
    batch = Loader(spec, global_batch_size=4, cache_dir=cache).batch_at(0, 0)
    n_eos = int((batch["input_ids"] == 1).sum())
    assert n_eos >= 1 and len(full) >= len(text) * 10 // 48


def test_remote_shards_go_through_a_bounded_lru_cache(tmp_path):
    local = make_dataset(str(tmp_path / "ds"), [15, 15, 15, 15], seq_len=32)
    fs = fsspec.filesystem("memory")
    for root, _, files in os.walk(tmp_path / "ds"):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), tmp_path / "ds")
            fs.pipe(f"/bucket/ds/{rel}", Path(os.path.join(root, name)).read_bytes())
    remote = "memory://bucket/ds/manifest.json"
    tar_size = os.path.getsize(tmp_path / "ds" / "shards" / "shard-000000.tar")
    budget = int(tar_size * 2.5)
    loader = Loader(remote, global_batch_size=6, cache_dir=str(tmp_path / "cache"), cache_budget_bytes=budget)
    loader._assembler.max_open = 1  # keep at most one shard pinned so eviction can happen
    assert collect(loader) == collect(Loader(local, global_batch_size=6))
    m = loader.metrics()
    assert m["cache_misses"] >= 4 and m["cache_evictions"] >= 1 and m["cache_hits"] >= 1
    assert loader.cache.used_bytes <= budget
    shutil.rmtree(tmp_path / "cache")
    cache = ShardCache(str(tmp_path / "cache2"), budget_bytes=10**9)
    path = cache.get("memory://bucket/ds/manifest.json")
    assert cache.get("memory://bucket/ds/manifest.json") == path and cache.stats.hits == 1


def test_energon_reads_our_shards(tmp_path):
    energon = pytest.importorskip("megatron.energon")
    from fm_loader.energon import write_energon_metadata

    path = make_dataset(str(tmp_path / "ds"), [7, 9], seq_len=32)
    shards_dir = str(tmp_path / "ds" / "shards")
    write_energon_metadata(shards_dir)
    ds = energon.get_train_dataset(
        shards_dir, batch_size=1, shuffle_buffer_size=None, max_samples_per_sequence=None,
        worker_config=energon.WorkerConfig.default_worker_config(0), split_part="train",
    )  # fmt: skip
    got = {}
    for sample in energon.get_loader(ds):
        key = sample.__key__[0] if isinstance(sample.__key__, list) else sample.__key__
        got[key] = sample
        if len(got) >= 16:
            break
    from fm_loader import read_rows

    expected = {f"{name}/{idx:08d}": row for row, name, idx in read_rows(path)}
    assert len(got) == 16
    for key, sample in got.items():
        shard_row = "/".join(key.replace(".tar", "").split("/")[-2:])
        row = expected[shard_row]
        tokens = sample.tokens[0] if isinstance(sample.tokens, list) else sample.tokens
        assert np.array_equal(np.asarray(tokens).reshape(-1), row.tokens)
