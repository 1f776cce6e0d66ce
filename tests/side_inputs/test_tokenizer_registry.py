"""Tokenizers are registered and pinned by sha256; a BPE is trained when none is given."""

from __future__ import annotations

import pytest

from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.tokenizer import TokenizerError, TokenizerRegistry

TEXTS = ["The platform turns raw text into shards.", "Shards feed trainers.", "Raw text, raw bytes."] * 50


def test_train_register_pin_and_reload(tmp_path):
    registry = TokenizerRegistry(ObjectStore(str(tmp_path)))
    sha = registry.train_bpe(iter(TEXTS), vocab_size=300)
    registry.pin(sha, origin="test")
    assert registry.pinned_sha() == sha
    pinned = registry.get(sha)
    assert pinned.eos_id is not None and pinned.vocab_size <= 300
    ids = pinned.tokenizer.encode("Shards feed trainers.").ids
    assert pinned.tokenizer.decode(ids) == "Shards feed trainers."
    # registering the same bytes again is idempotent and content-addressed
    assert registry.register_bytes(registry.store.read_bytes(f"tokenizers/{sha}.json")) == sha


def test_any_tokenizer_json_is_accepted_and_bad_files_refused(tmp_path):
    registry = TokenizerRegistry(ObjectStore(str(tmp_path / "a")))
    sha = registry.train_bpe(iter(TEXTS), vocab_size=280)
    path = tmp_path / "tokenizer.json"
    path.write_bytes(registry.store.read_bytes(f"tokenizers/{sha}.json"))
    other = TokenizerRegistry(ObjectStore(str(tmp_path / "b")))
    assert other.register_file(path) == sha
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerError, match=r"not a valid tokenizer\.json"):
        other.register_file(bad)
    with pytest.raises(TokenizerError, match="does not exist"):
        other.register_file(tmp_path / "missing.json")
