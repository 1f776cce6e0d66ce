"""Fail loud: corrupt bytes are always caught, tokenizer/vocab pins refuse, derived fields are right."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loader_helpers import collect, make_dataset

from fm_loader import CorruptRowError, DatasetManifest, Loader, PinningError, read_rows
from fm_loader.format import decode_index


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(str(tmp_path_factory.mktemp("integrity")), [12, 9], seq_len=24)


def _token_span(manifest_path: str, shard: int, row: int) -> tuple[str, int, int]:
    manifest = DatasetManifest.load(manifest_path)
    entry = manifest.shards[shard]
    index = decode_index(Path(manifest.index_uri(entry)).read_bytes())
    rec = index.records[row]
    return manifest.shard_uri(entry), int(rec["tokens_offset"]), int(rec["n_tokens"]) * 2


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    shard=st.integers(0, 1),
    row=st.integers(0, 8),
    flips=st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
)
def test_random_bit_flips_in_a_row_are_always_detected(dataset, tmp_path_factory, shard, row, flips):
    folder = tmp_path_factory.mktemp("flip")
    path = make_dataset(str(folder), [12, 9], seq_len=24)  # same seed -> same bytes as `dataset`
    tar, start, size = _token_span(path, shard, row)
    data = bytearray(Path(tar).read_bytes())
    bits = sorted({f % (size * 8) for f in flips})
    for bit in bits:
        data[start + bit // 8] ^= 1 << (bit % 8)
    Path(tar).write_bytes(bytes(data))
    with pytest.raises(CorruptRowError) as err:
        collect(Loader(path, global_batch_size=7))
    assert err.value.row == row and err.value.shard.endswith(f"shard-{shard:06d}.tar")
    skipping = Loader(path, global_batch_size=7, skip_corrupt=True)
    ids = [s for s in collect(skipping) if s >= 0]
    assert len(ids) == 20 and skipping.metrics()["corrupt_rows_skipped"] == 1


def test_corrupt_index_is_refused(dataset, tmp_path):
    path = make_dataset(str(tmp_path), [5], seq_len=24)
    idx = os.path.join(tmp_path, "shards", "shard-000000.idx")
    data = bytearray(Path(idx).read_bytes())
    data[40] ^= 4
    Path(idx).write_bytes(bytes(data))
    with pytest.raises(CorruptRowError, match="index"):
        collect(Loader(path, global_batch_size=2))


def test_tokenizer_and_vocab_pins_refuse_to_start(dataset):
    with pytest.raises(PinningError, match="tokenizer"):
        Loader(dataset, global_batch_size=4, expected_tokenizer_hash="some-other-tokenizer")
    with pytest.raises(PinningError, match="vocab_size"):
        Loader(dataset, global_batch_size=4, expected_vocab_size=50257)
    Loader(dataset, global_batch_size=4, expected_tokenizer_hash="tok-test", expected_vocab_size=1000)


def test_mixture_of_different_tokenizers_refuses(tmp_path):
    make_dataset(str(tmp_path / "a"), [4], name="a")
    make_dataset(str(tmp_path / "b"), [4], name="b", tokenizer_hash="other")
    (tmp_path / "m.yaml").write_text(
        "sources:\n  - manifest: a/manifest.json\n  - manifest: b/manifest.json\n"
    )
    with pytest.raises(PinningError, match="different tokenizers"):
        Loader(str(tmp_path / "m.yaml"), global_batch_size=2)


def test_derived_fields_match_a_per_row_reference(dataset):
    rows = {(name, idx): row for row, name, idx in read_rows(dataset)}
    manifest = DatasetManifest.load(dataset)
    offsets = np.cumsum([0] + [s.rows for s in manifest.shards])
    by_sample = {int(offsets[int(n[-6:])] + i): r for (n, i), r in rows.items()}
    for batch in Loader(dataset, global_batch_size=5):
        for b, sid in enumerate(batch["sample_ids"].tolist()):
            if sid < 0:
                assert int(batch["loss_mask"][b].sum()) == 0
                continue
            row = by_sample[sid]
            n, T = len(row.tokens), 24
            ids = batch["input_ids"][b].tolist()
            assert ids[:n] == row.tokens.tolist() and ids[n:] == [0] * (T - n)
            labels, pos, seg = [], [], []
            for d, length in enumerate(row.doc_lens):
                start = sum(row.doc_lens[:d])
                labels += [*row.tokens[start + 1 : start + length].tolist(), -100]
                pos += list(range(length))
                seg += [d + 1] * length
            assert batch["labels"][b].tolist() == labels + [-100] * (T - n)
            assert batch["position_ids"][b].tolist() == pos + [0] * (T - n)
            assert batch["segment_ids"][b].tolist() == seg + [0] * (T - n)
            cu = batch["cu_seqlens"][b].tolist()
            k = int(batch["num_docs"][b])
            assert k == len(row.doc_lens) and cu[: k + 1] == list(np.cumsum([0, *row.doc_lens]))
            assert set(cu[k:]) == {n} and int(batch["valid_token_count"][b]) == n
            assert batch["loss_mask"][b].tolist() == [x != -100 for x in labels + [-100] * (T - n)]


def test_metrics_report_throughput_and_stall(dataset):
    loader = Loader(dataset, global_batch_size=4)
    collect(loader)
    m = loader.metrics()
    assert m["rows"] == 21 and m["tokens"] > 0 and m["bytes"] == 2 * m["tokens"]
    assert m["rows_per_s"] > 0 and 0 <= m["input_stall_fraction"] <= 1
    json.dumps(m)


def test_batches_kept_by_the_trainer_are_never_overwritten_and_int64_ids_agree(dataset):
    held = list(Loader(dataset, global_batch_size=5, prefetch=2))  # all alive while later ones are built
    wide = Loader(dataset, global_batch_size=5, input_ids_dtype=torch.int64)
    assert held[0]["input_ids"].dtype == torch.int32 and held[0]["labels"].dtype == torch.int64
    for k, batch in enumerate(held):
        again = wide.batch_at(0, 5 * k)
        assert again["input_ids"].dtype == torch.int64
        for key, value in batch.items():
            assert torch.equal(value.to(again[key].dtype), again[key]), (k, key)
    # Batches the trainer has dropped lend their memory to later ones (no fresh pages per batch).
    buffers = {b["labels"].data_ptr() for b in Loader(dataset, global_batch_size=5, prefetch=0)}
    assert len(buffers) < len(held)
