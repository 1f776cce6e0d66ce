"""Pre-tokenized MDS documents (written by MosaicML's MDSWriter: tests/fixtures/mds/documents, 50-3,000 tokens
each) are packed into rows like the text path: every token once and in order, documents shorter than a row
never split, the same rows under any world size, exact resume; without ``pack`` the error says what to add."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from fm_loader import CorruptRowError, Loader

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mds")
SEQ_LEN = 2048


def _spec(**extra) -> dict:
    return {
        "sources": [
            {"mds": os.path.join(FIXTURE, "documents"), "seq_len": SEQ_LEN, "vocab_size": 50000, **extra}
        ]
    }


def _rows(loader) -> dict[int, tuple[list[int], list[int]]]:
    """sample id -> (tokens, document lengths) of every row the loader yields."""
    rows = {}
    for batch in loader:
        for b, sid in enumerate(batch["sample_ids"].tolist()):
            if sid < 0:
                continue
            n = int(batch["valid_token_count"][b])
            cu = batch["cu_seqlens"][b, : int(batch["num_docs"][b]) + 1].tolist()
            rows[sid] = (batch["input_ids"][b, :n].tolist(), np.diff(cu).tolist())
    return rows


def test_documents_are_packed_whole_every_token_once_in_order(tmp_path):
    documents = json.loads(Path(FIXTURE, "documents_expected.json").read_text())
    rows = _rows(Loader(_spec(pack=True), global_batch_size=4, cache_dir=str(tmp_path / "c")))
    _assert_packed(documents, rows)


def test_documents_written_now_by_mdswriter(tmp_path):
    """The same guarantees on a dataset MosaicML's MDSWriter writes in this run (its current version)."""
    streaming = pytest.importorskip(
        "streaming", reason="mosaicml-streaming not installed (pip install mosaicml-streaming)"
    )
    rng = np.random.default_rng(7)
    sizes = [
        50,
        3000,
        *rng.integers(50, 3001, 18).tolist(),
    ]  # at least one shorter than 200, one longer than a row
    documents = [rng.integers(0, 50000, n).astype(np.uint16) for n in sizes]
    out = str(tmp_path / "mds")
    with streaming.MDSWriter(
        out=out, columns={"tokens": "ndarray:uint16"}, compression="zstd", size_limit=1 << 14
    ) as w:
        for document in documents:
            w.write({"tokens": document})
    spec = {"sources": [{"mds": out, "seq_len": SEQ_LEN, "vocab_size": 50000, "pack": True}]}
    rows = _rows(Loader(spec, global_batch_size=4, cache_dir=str(tmp_path / "c")))
    _assert_packed([d.tolist() for d in documents], rows)


def _assert_packed(documents: list[list[int]], rows: dict[int, tuple[list[int], list[int]]]) -> None:
    assert any(len(d) > SEQ_LEN for d in documents) and any(len(d) < 200 for d in documents)
    ordered = [rows[sid] for sid in sorted(rows)]
    flat = [t for tokens, _ in ordered for t in tokens]
    assert flat == [t for d in documents for t in d]  # every token exactly once, documents in order
    segments = [n for _, lens in ordered for n in lens]
    assert all(len(tokens) <= SEQ_LEN for tokens, _ in ordered)
    whole = {len(d) for d in documents if len(d) <= SEQ_LEN}
    # each short document is one segment of its own length: never split across rows
    cursor = 0
    for document in documents:
        if len(document) <= SEQ_LEN:
            assert len(document) in segments[cursor : cursor + 1], (
                len(document),
                segments[cursor : cursor + 3],
            )
            cursor += 1
        else:
            covered = 0
            while covered < len(document):
                covered += segments[cursor]
                cursor += 1
            assert covered == len(document)
    assert cursor == len(segments) and whole


def test_world_size_independent_and_resumable(tmp_path):
    cache = str(tmp_path / "c")
    one = Loader(_spec(pack=True), global_batch_size=6, cache_dir=cache)
    full = [s for b in one for s in b["sample_ids"].tolist()]
    ranks = [
        Loader(_spec(pack=True), global_batch_size=6, rank=r, world_size=3, cache_dir=cache) for r in range(3)
    ]
    merged = [
        s
        for step in zip(*[list(r) for r in ranks], strict=True)
        for b in step
        for s in b["sample_ids"].tolist()
    ]
    assert sorted(merged) == sorted(full)
    first = Loader(_spec(pack=True), global_batch_size=6, cache_dir=cache)
    it = iter(first)
    head = [s for _ in range(2) for s in next(it)["sample_ids"].tolist()]
    resumed = Loader(_spec(pack=True), global_batch_size=6, cache_dir=cache)
    resumed.load_state_dict(first.state_dict())
    assert head + [s for b in resumed for s in b["sample_ids"].tolist()] == full


def test_without_pack_the_error_says_what_to_add(tmp_path):
    with pytest.raises(CorruptRowError, match="add 'pack: true'"):
        list(Loader(_spec(), global_batch_size=4, cache_dir=str(tmp_path / "c")))
