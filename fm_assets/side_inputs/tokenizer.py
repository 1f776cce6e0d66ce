"""Tokenizer registry: tokenizers are stored and pinned by the sha256 of their ``tokenizer.json``.

``tokenizers/<sha256>.json`` holds each registered file; ``tokenizers/pinned.json`` names the one the
pipeline uses. Pinning happens in one place only, the ``tokenizer`` asset (``ensure_pinned``): it registers
a configured file, or trains a byte-level BPE on a sample of the landed text, under a lock, once. The
tokenize stage only reads the pin (``pinned_tokenizer``); computing its key never trains or pins.

The training corpus does not depend on run order (``training_corpus``): it is the text of the earliest
landed complete batch that kept any text: its curated (``decontaminate``) documents, or, for a batch that
kept none (images or audio), its captions and transcripts as landed (``media_land``). Batches are looked at
in id order and each one's output is a pure function of what was landed, so the same root trains the same
tokenizer whichever runs go first. Until a batch looked at has that output, ``ensure_pinned`` raises
``EarlierBatchPending`` (the Dagster asset waits and retries), instead of training on whatever batches happen
to be done; it never waits on a batch later than the one being run (that would stall a serial run).
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
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import (
    EarlierBatchFailed,
    EarlierBatchPending,
    read_failure,
    read_ref,
    read_success,
    read_success_at,
)
from fm_assets.engine.store import ObjectStore, iter_parquet_batches

log = logging.getLogger(__name__)

EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "[SEP]", "<|end_of_text|>")
PINNED = layout.PINNED_TOKENIZER
TRAINING_STAGE = "decontaminate"  # the BPE learns from what reaches tokenize
CAPTION_STAGE = "media_land"  # else from captions/transcripts as landed (the media chain's first stage)
TRAINED_ORIGIN = "trained:"  # + the batch trained on: the pin's origin when no file was configured
CAPTIONS_SUFFIX = ":captions"  # + this when the BPE learnt from a media batch's captions


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


@dataclass(frozen=True)
class TrainingCorpus:
    """What a BPE learns from: the text column of ``stage``'s output for ``batch``."""

    batch: str
    stage: str  # TRAINING_STAGE (curated documents) or CAPTION_STAGE (captions and transcripts)

    @property
    def origin(self) -> str:
        return f"{TRAINED_ORIGIN}{self.batch}{CAPTIONS_SUFFIX if self.stage == CAPTION_STAGE else ''}"


PURPOSE = (
    "a BPE is trained on the text of the earliest landed batch that kept any (the same whatever runs first; set "
    "FM_TOKENIZER_FILE to pin a given tokenizer.json instead)"
)


def _output(store: ObjectStore, stage: str, batch: str, for_batch: str | None) -> StageSuccess:
    """``stage``'s current output for ``batch``; raises while there is none (pending, failed, or later than
    ``for_batch``, the batch being run, which must never wait on a later one)."""
    ref = read_ref(store, stage, batch)
    if ref is not None:
        return read_success_at(store, ref.prefix)
    error = read_failure(store, stage, batch)
    if error is not None:
        raise EarlierBatchFailed(stage, "tokenizer", {batch: error})
    if for_batch is not None and batch > for_batch:
        raise TokenizerError(
            f"cannot train a tokenizer yet: no landed batch up to {for_batch} kept any text (documents after "
            f"`{TRAINING_STAGE}`, captions or transcripts at `{CAPTION_STAGE}`), and the next one, {batch}, "
            f"has not run. Run it (`fm run {batch}`), then {for_batch} again; or set FM_TOKENIZER_FILE"
        )
    raise EarlierBatchPending(stage, "tokenizer", [batch], purpose=PURPOSE)


def training_corpus(store: ObjectStore, for_batch: str | None = None) -> TrainingCorpus:
    """The text a BPE is trained on: the earliest landed complete batch (id order, unreviewed quarantine
    batches skipped) that kept curated documents, or else captions/transcripts.

    A batch's documents are looked at before its captions, and a batch before the next one, so the choice
    depends only on what was landed. Raises ``EarlierBatchPending`` while the batch looked at has no output
    yet, ``EarlierBatchFailed`` when its latest run of that stage failed, and ``TokenizerError`` when nothing
    is landed or no landed batch kept any text.
    """
    landed = [b for b in list_complete_batches(store) if not held_for_review(store, b)]  # never unreviewed
    if not landed:
        raise TokenizerError(
            "cannot train a tokenizer: no landing batch is complete yet (land one with `fm land`, or set "
            "FM_TOKENIZER_FILE)"
        )
    for batch in landed:
        for stage in (TRAINING_STAGE, CAPTION_STAGE):
            if _output(store, stage, batch, for_batch).counts.records_out > 0:
                return TrainingCorpus(batch, stage)
    raise TokenizerError(
        f"cannot train a tokenizer: none of the {len(landed)} landed batch(es) kept any text (documents after "
        f"`{TRAINING_STAGE}`, captions or transcripts at `{CAPTION_STAGE}`); land some text, or set "
        "FM_TOKENIZER_FILE to pin a given tokenizer.json"
    )


def training_texts(store: ObjectStore, corpus: TrainingCorpus, limit: int) -> Iterator[str]:
    """Up to ``limit`` texts of ``corpus``, in part order (deterministic)."""

    def texts() -> Iterator[str]:
        for part in read_success(store, corpus.stage, corpus.batch).parts:
            for record_batch in iter_parquet_batches(store, part, columns=["text"]):
                yield from record_batch["text"].to_pylist()

    return itertools.islice(texts(), limit)


def ensure_pinned(
    store: ObjectStore, spec: TokenizerSpec, *, for_batch: str | None = None
) -> tuple[PinnedTokenizer, str]:
    """Pin the tokenizer ``spec`` asks for, once; returns (pinned tokenizer, what happened).

    A configured file is registered and pinned (re-pinned when it changed). Without one, an existing pin
    stays; only when nothing is pinned is a BPE trained, on ``training_corpus`` (raises
    ``EarlierBatchPending`` until the batch it looks at has output; ``for_batch``, the batch being run, bounds
    how far it looks). The lock makes concurrent runs agree on one pin; the fixed corpus makes that pin the
    same whichever run takes the lock first.
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
        corpus = training_corpus(store, for_batch)
        what = "curated text" if corpus.stage == TRAINING_STAGE else "captions and transcripts"
        log.info(
            "no tokenizer configured or pinned: training a byte-level BPE on the %s of %s", what, corpus.batch
        )
        sha = registry.train_bpe(training_texts(store, corpus, spec.train_sample_docs), spec.train_vocab_size)
        registry.pin(sha, origin=corpus.origin)
        return registry.get(sha), "trained"
