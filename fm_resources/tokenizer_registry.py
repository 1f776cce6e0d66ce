"""Tokenizer registry: tokenizers are stored and pinned by the sha256 of their ``tokenizer.json``.

``tokenizers/<sha256>.json`` holds each registered file; ``tokenizers/pinned.json`` names the one the
pipeline uses. When none is configured or pinned, a byte-level BPE is trained from a sample of the
data and pinned, so the same run always tokenizes with the same ids.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from fm_resources.object_store import ObjectStore

log = logging.getLogger(__name__)

EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "[SEP]", "<|end_of_text|>")
PINNED = "tokenizers/pinned.json"


class TokenizerError(ValueError):
    """A tokenizer that cannot be used; the message says why."""


@dataclass(frozen=True)
class PinnedTokenizer:
    sha256: str
    tokenizer: Tokenizer
    vocab_size: int
    eos_id: int | None


def _load(data: bytes, sha: str) -> PinnedTokenizer:
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # the tokenizers library raises a bare Exception on bad JSON
        raise TokenizerError(f"tokenizer {sha[:12]} is not a valid tokenizer.json: {exc}") from exc
    eos_id = next((tokenizer.token_to_id(t) for t in EOS_CANDIDATES if tokenizer.token_to_id(t) is not None), None)
    return PinnedTokenizer(sha, tokenizer, tokenizer.get_vocab_size(with_added_tokens=True), eos_id)


class TokenizerRegistry:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def register_bytes(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        _load(data, sha)  # refuse to register something unusable
        rel = f"tokenizers/{sha}.json"
        if not self.store.exists(rel):
            self.store.write_bytes(rel, data)
        return sha

    def register_file(self, path: str | Path) -> str:
        path = Path(path)
        if not path.is_file():
            raise TokenizerError(f"tokenizer file {path} does not exist")
        return self.register_bytes(path.read_bytes())

    def get(self, sha: str) -> PinnedTokenizer:
        rel = f"tokenizers/{sha}.json"
        if not self.store.exists(rel):
            raise TokenizerError(f"tokenizer {sha} is not registered in {self.store.root}")
        return _load(self.store.read_bytes(rel), sha)

    def pin(self, sha: str, *, origin: str) -> None:
        pinned = self.get(sha)
        self.store.write_json(PINNED, {"sha256": sha, "vocab_size": pinned.vocab_size, "origin": origin})

    def pinned_sha(self) -> str | None:
        return self.store.read_json(PINNED)["sha256"] if self.store.exists(PINNED) else None

    def train_bpe(self, texts: Iterable[str], vocab_size: int) -> str:
        """Train a byte-level BPE on ``texts`` and register it; returns its sha256."""
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=["<|endoftext|>", "<|pad|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(texts, trainer=trainer)
        sha = self.register_bytes(tokenizer.to_str().encode("utf-8"))
        log.info("trained byte-level BPE (vocab %d) -> %s", tokenizer.get_vocab_size(), sha[:12])
        return sha


class TokenizerRegistryResource(ConfigurableResource):
    """Which tokenizer the tokenize stage uses: a given ``tokenizer.json``, else the pinned one, else a trained BPE."""

    tokenizer_file: str | None = Field(default=None, description="Path to a tokenizer.json to register and pin")
    train_vocab_size: int = Field(default=8192, description="Vocab size when a BPE is trained from the data")
    train_sample_docs: int = Field(default=20000, description="Documents sampled to train the BPE")
