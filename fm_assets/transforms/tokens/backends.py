"""Compiled BPE encoders behind one interface: ``encode_flat(texts) -> (values, offsets)``.

Each ``Backend`` says which ``tokenizer_json`` features it reproduces exactly and builds an encoder from the
tokenizer.json text. The libraries are imported when a backend is built, so a missing one is just a backend
that is not available (``ImportError``). Which one is used, and the check that it matches HF, is
``encoder.build_encoder``'s business. Encoders pickle as what they were built from (the tokenizer.json), so
the tokenize stage's prepared encoder can go to unit worker processes, which rebuild it.

- fastokens: a reimplementation of HF ``tokenizers`` (merge-list BPE, PCRE2 split regexes) read from the
  same tokenizer.json; flat output straight from Rust. Its word cache is bounded.
- gigatoken: a merge-list BPE read from the tokenizer.json, with hand-written pre-tokenizers for the split
  regexes it recognizes (it refuses others). It silently ignores ``ByteLevel(use_regex=False)``, so that
  feature is not claimed. Its encode cache is unbounded, so the encoder is rebuilt every
  ``GIGATOKEN_REBUILD_TOKENS`` tokens to keep memory flat.
- tiktoken: a rank-based BPE built from the vocabulary (``merge_ranks.tiktoken_ranks`` refuses vocabularies
  where ranks and merges disagree). Only the ByteLevel regex: tiktoken drops text its pattern does not
  match, where a Split pre-tokenizer would keep it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from fm_assets.transforms.tokens.flat import Flat, flat_from_arrays, offsets_of
from fm_assets.transforms.tokens.merge_ranks import tiktoken_ranks
from fm_assets.transforms.tokens.tokenizer_json import (
    IGNORE_MERGES,
    NESTED_ADDED,
    NO_REGEX,
    NONSPECIAL_ADDED,
    PREFIX_SPACE,
    SPLIT_REGEX,
    ByteLevelBpe,
)

GIGATOKEN_REBUILD_TOKENS = 64_000_000


class TokenEncoder(Protocol):
    backend: str

    def encode_flat(self, texts: Sequence[str]) -> Flat:
        """Token ids of ``texts`` without special tokens added, as (values, offsets)."""
        ...


class FastokensEncoder:
    backend = "fastokens"

    def __init__(self, tokenizer_json: str) -> None:
        import fastokens

        self._json = tokenizer_json
        self._tokenizer = fastokens.Tokenizer.from_json_str(tokenizer_json)

    def __reduce__(self) -> tuple[Any, ...]:  # to worker processes: rebuilt there from the tokenizer.json
        return (FastokensEncoder, (self._json,))

    def encode_flat(self, texts: Sequence[str]) -> Flat:
        ids, offsets = self._tokenizer.encode_batch_flat(list(texts), add_special_tokens=False)
        values = np.frombuffer(ids, dtype="<u4").astype(np.uint32, copy=False)
        return values, np.frombuffer(offsets, dtype="<u8").astype(np.int64)


class GigatokenEncoder:
    backend = "gigatoken"

    def __init__(self, tokenizer_json: str, rebuild_tokens: int = GIGATOKEN_REBUILD_TOKENS) -> None:
        import gigatoken

        self._json = tokenizer_json
        self._build: Callable[[], Any] = lambda: gigatoken.Tokenizer.from_json(tokenizer_json)
        self._tokenizer = self._build()
        self._rebuild_tokens = rebuild_tokens
        self._tokens_since_build = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (GigatokenEncoder, (self._json, self._rebuild_tokens))

    def encode_flat(self, texts: Sequence[str]) -> Flat:
        import awkward as ak

        encoded = self._tokenizer.encode_batch(list(texts))
        values = np.asarray(ak.flatten(encoded, axis=1)).astype(np.uint32, copy=False)
        lengths = np.asarray(ak.num(encoded, axis=1)).astype(np.int64, copy=False)
        self._tokens_since_build += len(values)
        if self._tokens_since_build >= self._rebuild_tokens:  # drop the unbounded encode cache
            self._tokenizer = self._build()
            self._tokens_since_build = 0
        return values, offsets_of(lengths)


class TiktokenEncoder:
    backend = "tiktoken"

    def __init__(self, spec: ByteLevelBpe) -> None:
        ranks = tiktoken_ranks(spec)  # first: a vocabulary tiktoken cannot reproduce is refused as such

        import tiktoken

        self._spec = spec
        self._encoding = tiktoken.Encoding(
            name="fm-tokenize",
            pat_str=spec.split_pattern,
            mergeable_ranks=ranks,
            special_tokens={token.content: token.id for token in spec.added},
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (TiktokenEncoder, (self._spec,))

    def encode_flat(self, texts: Sequence[str]) -> Flat:
        return flat_from_arrays(
            [self._encoding.encode_to_numpy(text, allowed_special="all") for text in texts]
        )


@dataclass(frozen=True)
class Backend:
    name: str
    supports: frozenset[str]  # tokenizer_json features it reproduces exactly
    build: Callable[[str, ByteLevelBpe], TokenEncoder]  # (tokenizer.json text, its structure) -> encoder


BACKENDS: dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend(
            "fastokens",
            frozenset({PREFIX_SPACE, SPLIT_REGEX, NO_REGEX, IGNORE_MERGES, NONSPECIAL_ADDED, NESTED_ADDED}),
            lambda text, spec: FastokensEncoder(text),
        ),
        Backend(
            "gigatoken",
            frozenset({PREFIX_SPACE, SPLIT_REGEX, IGNORE_MERGES, NONSPECIAL_ADDED}),
            lambda text, spec: GigatokenEncoder(text),
        ),
        Backend(
            "tiktoken", frozenset({IGNORE_MERGES, NONSPECIAL_ADDED}), lambda text, spec: TiktokenEncoder(spec)
        ),
    )
}
