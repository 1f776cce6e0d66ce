"""Builders for small synthetic datasets in fm_loader tests."""

from __future__ import annotations

import os

import numpy as np

from fm_loader import DatasetManifest, PackedRow, ShardEntry, encode_shard


def random_rows(rng: np.random.Generator, count: int, seq_len: int, vocab: int, tag: str) -> list[PackedRow]:
    rows = []
    for r in range(count):
        n = int(rng.integers(1, seq_len + 1))
        cuts = sorted(set(rng.integers(1, n, size=int(rng.integers(0, 4))).tolist())) if n > 1 else []
        doc_lens = np.diff([0, *cuts, n]).tolist()
        rows.append(
            PackedRow(rng.integers(0, vocab, n), doc_lens, [f"{tag}:{r}:{i}" for i in range(len(doc_lens))])
        )
    return rows


def make_dataset(
    folder: str,
    shard_rows: list[int],
    seq_len: int = 32,
    vocab: int = 1000,
    seed: int = 0,
    name: str = "ds",
    tokenizer_hash: str = "tok-test",
) -> str:
    """Write shards + manifest into ``folder``; returns the manifest path."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(folder, "shards"), exist_ok=True)
    entries = []
    for s, count in enumerate(shard_rows):
        enc = encode_shard(
            random_rows(rng, count, seq_len, vocab, f"{name}{s}"), f"shard-{s:06d}", seq_len, vocab
        )
        for file_name, data in enc.files.items():
            with open(os.path.join(folder, "shards", file_name), "wb") as f:
                f.write(data)
        entries.append(ShardEntry.from_info(enc.info, "shards"))
    manifest = DatasetManifest(name, "v1", seq_len, vocab, tokenizer_hash, "test-code", entries)
    path = os.path.join(folder, "manifest.json")
    manifest.save(path)
    return path


def collect(loader) -> list[int]:
    """All sample ids the loader yields, in order, including -1 padding."""
    return [int(x) for batch in loader for x in batch["sample_ids"].tolist()]
