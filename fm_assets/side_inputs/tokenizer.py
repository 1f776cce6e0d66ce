"""Tokenizer registry: tokenizers are stored and pinned by the sha256 of their ``tokenizer.json``.

``tokenizers/<sha256>.json`` holds each registered file; ``tokenizers/pinned.json`` names the one the
pipeline uses. Pinning happens in one place only, the ``tokenizer`` asset (``ensure_pinned``): it registers
a configured file, or trains a byte-level BPE on a sample of the curated text, under a lock, once. The
tokenize stage only reads the pin (``pinned_tokenizer``); computing its key never trains or pins.

The training corpus does not depend on run order: it is the curated (``decontaminate``) text of the
earliest landed complete batch only, a batch that has no earlier batch and so the same output whichever
runs go first. Until that batch has curated output, ``ensure_pinned`` raises ``EarlierBatchPending`` (the
Dagster asset waits and retries), instead of training on whatever batches happen to be done.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_bytes
from fm_assets.engine.landing import held_for_review, list_complete_batches
from fm_assets.engine.locks import store_lock
from fm_assets.engine.refs import EarlierBatchPending, read_ref, read_success
from fm_assets.engine.store import ObjectStore, iter_parquet_batches

log = logging.getLogger(__name__)

EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "[SEP]", "<|end_of_text|>")
PINNED = layout.PINNED_TOKENIZER
TRAINING_STAGE = "decontaminate"  # the BPE learns from what reaches tokenize
TRAINED_ORIGIN = "trained:"  # + the batch trained on: the pin's origin when no file was configured


class TokenizerError(ValueError):
    """A tokenizer that cannot be used; the message says why."""


class TokenizerNotPinnedError(TokenizerError):
    """tokenize ran before the tokenizer asset pinned a tokenizer."""


@dataclass(frozen=True)
class PinnedTokenizer:
    sha256: str
    tokenizer: Tokenizer
    vocab_size: int
    eos_id: int | None


@dataclass(frozen=True)
class TokenizerSpec:
    """How the tokenizer asset gets its tokenizer: a given file, else a BPE trained on the curated text."""

    tokenizer_file: str | None = None
    train_vocab_size: int = 8192
    train_sample_docs: int = 20000


def _load(data: bytes, sha: str) -> PinnedTokenizer:
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # the tokenizers library raises a bare Exception on bad JSON
        raise TokenizerError(f"tokenizer {sha[:12]} is not a valid tokenizer.json: {exc}") from exc
    eos_id = next(
        (tokenizer.token_to_id(t) for t in EOS_CANDIDATES if tokenizer.token_to_id(t) is not None), None
    )
    return PinnedTokenizer(sha, tokenizer, tokenizer.get_vocab_size(with_added_tokens=True), eos_id)


class TokenizerRegistry:
    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def register_bytes(self, data: bytes) -> str:
        sha = sha256_bytes(data)
        _load(data, sha)  # refuse to register something unusable
        rel = layout.tokenizer_blob(sha)
        if not self.store.exists(rel):
            self.store.write_bytes(rel, data)
        return sha

    def register_file(self, path: str | Path) -> str:
        path = Path(path)
        if not path.is_file():
            raise TokenizerError(f"tokenizer file {path} does not exist")
        return self.register_bytes(path.read_bytes())

    def get(self, sha: str) -> PinnedTokenizer:
        rel = layout.tokenizer_blob(sha)
        if not self.store.exists(rel):
            raise TokenizerError(f"tokenizer {sha} is not registered in {self.store.root}")
        return _load(self.store.read_bytes(rel), sha)

    def pin(self, sha: str, *, origin: str) -> None:
        pinned = self.get(sha)
        self.store.write_json(PINNED, {"sha256": sha, "vocab_size": pinned.vocab_size, "origin": origin})

    def pinned_sha(self) -> str | None:
        return self.store.read_json(PINNED)["sha256"] if self.store.exists(PINNED) else None

    def pin_record(self) -> dict | None:
        return self.store.read_json(PINNED) if self.store.exists(PINNED) else None

    def train_bpe(self, texts: Iterable[str], vocab_size: int) -> str:
        """Train a byte-level BPE on ``texts`` and register it; returns its sha256."""
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)  # type: ignore[assignment]
        tokenizer.decoder = decoders.ByteLevel()  # type: ignore[assignment]
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


def pinned_tokenizer(store: ObjectStore) -> PinnedTokenizer:
    """The pinned tokenizer (read only). Fails clearly when nothing is pinned yet."""
    registry = TokenizerRegistry(store)
    sha = registry.pinned_sha()
    if sha is None:
        raise TokenizerNotPinnedError(
            "no tokenizer is pinned yet: materialize the `tokenizer` asset first "
            "(`fm run` and the preprocess job do; set FM_TOKENIZER_FILE to pin a given tokenizer.json)"
        )
    return registry.get(sha)


def training_batch(store: ObjectStore) -> str:
    """The batch a BPE is trained on: the earliest landed complete one, once its curated output exists.

    Raises ``TokenizerError`` when nothing is landed, ``EarlierBatchPending`` while that batch has no
    ``decontaminate`` output yet (its run is still going, or it has not been run).
    """
    landed = [b for b in list_complete_batches(store) if not held_for_review(store, b)]  # never unreviewed
    if not landed:
        raise TokenizerError(
            "cannot train a tokenizer: no landing batch is complete yet (land one with `fm land`, or set "
            "FM_TOKENIZER_FILE)"
        )
    earliest = landed[0]
    if read_ref(store, TRAINING_STAGE, earliest) is None:
        raise EarlierBatchPending(
            TRAINING_STAGE,
            "tokenizer",
            [earliest],
            purpose="a BPE is trained on the curated text of the earliest landed batch (the same whatever runs "
            "first; set FM_TOKENIZER_FILE to pin a given tokenizer.json instead)",
        )
    return earliest


def training_texts(store: ObjectStore, batch: str, limit: int) -> Iterator[str]:
    """Up to ``limit`` curated documents of ``batch``, in part order (deterministic)."""

    def texts() -> Iterator[str]:
        for part in read_success(store, TRAINING_STAGE, batch).parts:
            for record_batch in iter_parquet_batches(store, part, columns=["text"]):
                yield from record_batch["text"].to_pylist()

    return itertools.islice(texts(), limit)


def ensure_pinned(store: ObjectStore, spec: TokenizerSpec) -> tuple[PinnedTokenizer, str]:
    """Pin the tokenizer ``spec`` asks for, once; returns (pinned tokenizer, what happened).

    A configured file is registered and pinned (re-pinned when it changed). Without one, an existing pin
    stays; only when nothing is pinned is a BPE trained, on the curated text of the earliest landed batch
    (``training_batch``: raises ``EarlierBatchPending`` until it has some). The lock makes concurrent runs
    agree on one pin; the fixed corpus makes that pin the same whichever run takes the lock first.
    """
    registry = TokenizerRegistry(store)
    with store_lock(store, "tokenizer"):
        if spec.tokenizer_file:
            sha = registry.register_file(spec.tokenizer_file)
            if registry.pinned_sha() == sha:
                return registry.get(sha), "unchanged"
            registry.pin(sha, origin=f"file:{spec.tokenizer_file}")
            return registry.get(sha), "pinned file"
        sha = registry.pinned_sha()
        if sha is not None:
            return registry.get(sha), "unchanged"
        batch = training_batch(store)
        texts = training_texts(store, batch, spec.train_sample_docs)
        first = next(texts, None)
        if first is None:
            raise TokenizerError(
                f"cannot train a tokenizer: the earliest landed batch {batch} kept no documents after "
                f"`{TRAINING_STAGE}`; set FM_TOKENIZER_FILE to pin a given tokenizer.json"
            )
        log.info("no tokenizer configured or pinned: training a byte-level BPE on batch %s", batch)
        sha = registry.train_bpe(itertools.chain([first], texts), spec.train_vocab_size)
        registry.pin(sha, origin=f"{TRAINED_ORIGIN}{batch}")
        return registry.get(sha), "trained"
