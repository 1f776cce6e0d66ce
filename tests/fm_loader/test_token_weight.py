"""Mixture weights by tokens: ``token_weight`` shares an epoch's tokens, not its rows."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fm_loader import DatasetManifest, Loader, PackedRow, ShardEntry, encode_shard
from fm_loader.batching import SOURCE_SHIFT
from fm_loader.mixture import MixtureError

SEQ, VOCAB = 32, 1000


def fixed_length_dataset(folder: str, rows: int, row_tokens: int, name: str) -> str:
    """``rows`` rows of exactly ``row_tokens`` tokens each (one document per row), in two shards."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(len(name))
    entries = []
    for s, count in enumerate((rows // 2, rows - rows // 2)):
        packed = [PackedRow(rng.integers(0, VOCAB, row_tokens), [row_tokens]) for _ in range(count)]
        enc = encode_shard(packed, f"{name}-{s}", SEQ, VOCAB)
        for file_name, data in enc.files.items():
            with open(os.path.join(folder, file_name), "wb") as f:
                f.write(data)
        entries.append(ShardEntry.from_info(enc.info))
    path = os.path.join(folder, "manifest.json")
    DatasetManifest(name, "v1", SEQ, VOCAB, "tok-test", "test", entries).save(path)
    return path


@pytest.fixture
def long_and_short(tmp_path):
    long = fixed_length_dataset(str(tmp_path / "long"), 20, 32, "long")  # 640 tokens
    short = fixed_length_dataset(str(tmp_path / "short"), 40, 8, "short")  # 320 tokens
    return long, short


def tokens_by_source(loader: Loader) -> dict[int, int]:
    totals: dict[int, int] = {}
    for batch in loader:
        for sample, n in zip(batch["sample_ids"].tolist(), batch["valid_token_count"].tolist(), strict=True):
            if sample >= 0:
                totals[sample >> SOURCE_SHIFT] = totals.get(sample >> SOURCE_SHIFT, 0) + n
    return totals


def test_equal_token_weights_give_equal_tokens_where_row_weights_do_not(long_and_short):
    long, short = long_and_short
    by_rows = {"sources": [{"manifest": long, "weight": 1}, {"manifest": short, "weight": 1}]}
    assert tokens_by_source(Loader(by_rows, global_batch_size=5)) == {0: 30 * 32, 1: 30 * 8}
    by_tokens = {"sources": [{"manifest": long, "token_weight": 1}, {"manifest": short, "token_weight": 1}]}
    loader = Loader(by_tokens, global_batch_size=5, epochs=2)
    assert loader.mixture.counts == [15, 60]  # 480 tokens each of the 960; the short source tiles 1.5 passes
    assert tokens_by_source(loader) == {0: 2 * 480, 1: 2 * 480}


def test_epoch_tokens_and_uneven_weights_round_to_the_nearest_row(long_and_short):
    long, short = long_and_short
    spec = {
        "epoch_tokens": 1000,
        "sources": [{"manifest": long, "token_weight": 3}, {"manifest": short, "token_weight": 1}],
    }
    # shares 750 and 250 tokens: 750 / 32 = 23.4 -> 23 rows, 250 / 8 = 31.25 -> 31 rows
    assert Loader(spec, global_batch_size=4).mixture.counts == [23, 31]


def test_token_weight_mixes_with_choose_and_keeps_the_stream_pure(long_and_short):
    long, short = long_and_short
    spec = {"sources": [{"manifest": long, "token_weight": 1}, {"manifest": short, "choose": 7}]}
    first = Loader(spec, global_batch_size=4, seed=3)
    again = Loader(spec, global_batch_size=4, seed=3)
    assert first.mixture.counts == [20, 7]
    assert [b["sample_ids"].tolist() for b in first] == [b["sample_ids"].tolist() for b in again]
    assert first.stream.fingerprint == again.stream.fingerprint


def test_two_shares_on_one_source_and_sources_without_token_counts_are_refused(long_and_short):
    long, _ = long_and_short
    with pytest.raises(MixtureError, match="not both \\(this source has weight and token_weight\\)"):
        Loader({"sources": [{"manifest": long, "weight": 1, "token_weight": 1}]}, global_batch_size=2)
    with pytest.raises(MixtureError, match="'token_weight' must be a number > 0"):
        Loader({"sources": [{"manifest": long, "token_weight": 0}]}, global_batch_size=2)
    mds = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mds", "tokens")
    entry = {"mds": mds, "seq_len": SEQ, "vocab_size": VOCAB, "token_weight": 1}
    with pytest.raises(MixtureError, match="only manifest sources record"):
        Loader({"sources": [{"manifest": long, "token_weight": 1}, entry]}, global_batch_size=2)
