"""The fastest encoder that gives the pinned HF tokenizer's ids, chosen once per tokenizer.

``build_encoder(tokenizer)`` tries the compiled backends in ``PREFERENCE`` order (fastest first, from
``bench/tokenizer_speed.py``) and takes the first that

1. reproduces the tokenizer.json's structure (``tokenizer_json.byte_level_bpe``: a byte-level BPE without
   normalizer, dropout or whitespace-stripping added tokens, whose extra features the backend supports),
2. is installed and builds from that tokenizer.json, and
3. passes a self-test: the same ids as HF on every probe string (``probes``: unicode, whitespace runs,
   digits, contractions, control characters, long repeats, the added tokens in context).

Otherwise it falls back to HF ``tokenizers`` itself (``HFEncoder``). The choice and every rejected backend,
with the reason, are logged and kept in the ``EncoderChoice``. The ids are the HF ids by contract, so the
backend is never part of a stage key; the tokenize stage's ``hf_reencode_sample`` check re-encodes a sample
with HF to hold the contract on real output.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from fm_assets.transforms.tokens.backends import BACKENDS, TokenEncoder
from fm_assets.transforms.tokens.flat import Flat, doc, flat_from_lists
from fm_assets.transforms.tokens.probes import probe_strings
from fm_assets.transforms.tokens.tokenizer_json import UnsupportedTokenizer, byte_level_bpe

log = logging.getLogger(__name__)

HF = "hf"
# Fastest first (bench/tokenizer_speed.py). fastokens before gigatoken: as fast within the noise, its cache is
# bounded, it needs no other package and it runs any Split regex through a real regex engine.
PREFERENCE: tuple[str, ...] = ("fastokens", "gigatoken", "tiktoken", HF)

__all__ = [
    "BACKENDS",
    "HF",
    "PREFERENCE",
    "EncoderChoice",
    "HFEncoder",
    "TokenEncoder",
    "build_encoder",
    "encoder_for",
]


class HFEncoder:
    """HF ``tokenizers`` itself: the reference every other backend must equal, and the fallback."""

    backend = HF

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    def encode_flat(self, texts: Sequence[str]) -> Flat:
        encodings = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return flat_from_lists([encoding.ids for encoding in encodings])


@dataclass(frozen=True)
class EncoderChoice:
    encoder: TokenEncoder
    reason: str
    rejected: dict[str, str] = field(default_factory=dict)  # backend -> why it was not used

    @property
    def backend(self) -> str:
        return self.encoder.backend

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "reason": self.reason, "rejected": dict(self.rejected)}


def first_difference(reference: Flat, candidate: Flat) -> int | None:
    """Index of the first document whose ids differ (a different document count counts as document 0)."""
    if len(reference[1]) != len(candidate[1]):
        return 0
    if np.array_equal(reference[1], candidate[1]) and np.array_equal(reference[0], candidate[0]):
        return None
    for i in range(len(reference[1]) - 1):
        if not np.array_equal(doc(reference, i), doc(candidate, i)):
            return i
    return None


def self_test(reference: TokenEncoder, candidate: TokenEncoder, probes: Sequence[str]) -> str | None:
    """None when ``candidate`` gives ``reference``'s ids on every probe, else what differed."""
    expected = reference.encode_flat(probes)
    found = candidate.encode_flat(probes)
    differs = first_difference(expected, found)
    if differs is None:
        return None
    return (
        f"self-test: probe {differs} {probes[differs][:40]!r} gives {doc(found, differs)[:12].tolist()}, "
        f"HF gives {doc(expected, differs)[:12].tolist()}"
    )


def build_encoder(tokenizer: Tokenizer, preference: Sequence[str] = PREFERENCE) -> EncoderChoice:
    """The first backend in ``preference`` that reproduces ``tokenizer`` exactly, else HF (see module doc)."""
    unknown = [name for name in preference if name != HF and name not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown tokenizer backends {unknown}; known: {[*BACKENDS, HF]}")
    reference = HFEncoder(tokenizer)
    text = tokenizer.to_str()
    rejected: dict[str, str] = {}
    try:
        spec = byte_level_bpe(json.loads(text))
    except UnsupportedTokenizer as exc:
        spec = None
        rejected = {name: f"not a plain byte-level BPE: {exc}" for name in preference if name != HF}
    if spec is not None:
        probes = probe_strings(token.content for token in spec.added)
        for name in preference:
            if name == HF:
                break
            backend = BACKENDS[name]
            missing = spec.features - backend.supports
            if missing:
                rejected[name] = (
                    f"tokenizer.json uses {', '.join(sorted(missing))}, which {name} does not reproduce"
                )
                continue
            try:
                encoder = backend.build(text, spec)
            except ImportError as exc:
                rejected[name] = f"not installed ({exc})"
                continue
            except Exception as exc:  # the libraries raise plain exceptions for what they do not support
                rejected[name] = f"cannot build: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                continue
            problem = self_test(reference, encoder, probes)
            if problem is not None:
                rejected[name] = problem
                continue
            choice = EncoderChoice(
                encoder, f"byte-level BPE, same ids as HF on {len(probes)} probes", rejected
            )
            _log(choice)
            return choice
    reason = "no faster backend reproduces this tokenizer" if rejected else "HF preferred"
    choice = EncoderChoice(reference, reason, rejected)
    _log(choice)
    return choice


_CHOICES: dict[str, EncoderChoice] = {}  # tokenizer.json sha256 -> this process's choice
_CHOOSING = threading.Lock()  # a choice being made on another thread is waited for, not made twice


def encoder_for(tokenizer_sha256: str, tokenizer: Tokenizer) -> EncoderChoice:
    """``build_encoder``'s choice for the tokenizer whose tokenizer.json has this sha256, chosen once per process:
    the choice and its self-test cost ~0.1-0.2 s, which a run of many batches paid in every tokenize stage.
    Thread-safe: ``fm run`` may make it on a background thread while the earlier stages' units run."""
    with _CHOOSING:
        choice = _CHOICES.get(tokenizer_sha256)
        if choice is None:
            choice = _CHOICES[tokenizer_sha256] = build_encoder(tokenizer)
    return choice


def _log(choice: EncoderChoice) -> None:
    log.info("tokenizer encoder: %s (%s)", choice.backend, choice.reason)
    for name, why in choice.rejected.items():
        log.info("tokenizer encoder: not %s: %s", name, why)
