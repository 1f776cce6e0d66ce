"""The structure of a ``tokenizer.json``: is it a plain byte-level BPE that a compiled encoder can reproduce?

A compiled BPE (fastokens, gigatoken, tiktoken) gives the HF ``tokenizers`` ids only for the tokenizers it
implements. ``byte_level_bpe`` reads the parts of a ``tokenizer.json`` that decide the ids for
``encode(text, add_special_tokens=False)`` and either describes the tokenizer as a ``ByteLevelBpe`` or raises
``UnsupportedTokenizer`` with the reason (a normalizer, another pre-tokenizer or model, BPE dropout, added
tokens that strip whitespace, truncation or padding, ...). What a ``ByteLevelBpe`` uses beyond the plain
GPT-2 shape is listed in ``features``, so each backend can say which of those it supports.

The post-processor and decoder are ignored on purpose: the tokenize stage encodes without special tokens
(``add_special_tokens=False``) and never decodes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The split regex of the HF ``ByteLevel`` pre-tokenizer with ``use_regex=True`` (GPT-2's pattern).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# Features a byte-level BPE may use beyond the plain GPT-2 shape (ByteLevel regex, no prefix space).
PREFIX_SPACE = "prefix_space"  # ByteLevel(add_prefix_space=True)
SPLIT_REGEX = "split_regex"  # Sequence[Split(Regex, Isolated), ByteLevel(use_regex=False)]
NO_REGEX = "no_regex"  # ByteLevel(use_regex=False) alone: the whole text is one pre-token
IGNORE_MERGES = "ignore_merges"  # a pre-token found in the vocabulary is one token
NONSPECIAL_ADDED = "nonspecial_added"  # added tokens that are not special (matched in text all the same)
NESTED_ADDED = "nested_added"  # one added token occurs inside another
FEATURES = frozenset({PREFIX_SPACE, SPLIT_REGEX, NO_REGEX, IGNORE_MERGES, NONSPECIAL_ADDED, NESTED_ADDED})


class UnsupportedTokenizer(ValueError):
    """The tokenizer.json is not something a compiled backend reproduces exactly; the message says why."""


@dataclass(frozen=True)
class AddedToken:
    content: str
    id: int
    special: bool


@dataclass(frozen=True)
class ByteLevelBpe:
    """A byte-level BPE tokenizer.json reduced to what decides its ids."""

    vocab: Mapping[str, int]  # byte-level token string -> id (the model's vocabulary)
    merges: tuple[tuple[str, str], ...]  # in priority order
    split_pattern: str  # the regex that cuts text into pre-tokens (GPT2_PATTERN for a plain ByteLevel)
    added: tuple[AddedToken, ...]
    features: frozenset[str]


@functools.cache
def byte_to_char() -> dict[int, str]:
    """The byte-level alphabet: each byte is shown as a printable character (GPT-2's reversible mapping).

    Printable Latin-1 bytes stand for themselves; the other 68 bytes (controls, space, NBSP, soft hyphen)
    take the code points from U+0100 upward, in byte order.
    """
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    table: dict[int, str] = {}
    shifted = 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(0x100 + shifted)
            shifted += 1
    return table


@functools.cache
def char_to_byte() -> dict[str, int]:
    return {char: byte for byte, char in byte_to_char().items()}


def token_bytes(token: str) -> bytes:
    """The raw bytes a byte-level vocabulary entry stands for."""
    decode = char_to_byte()
    try:
        return bytes(decode[char] for char in token)
    except KeyError as exc:
        raise UnsupportedTokenizer(f"vocabulary entry {token!r} is not in the byte-level alphabet") from exc


def _pre_tokenizer(config: Mapping[str, Any] | None) -> tuple[str, set[str]]:
    """(split pattern, features) of a supported pre-tokenizer; raises for anything else."""
    if config is None:
        raise UnsupportedTokenizer("no pre-tokenizer (a byte-level BPE needs the ByteLevel pre-tokenizer)")
    steps = config["pretokenizers"] if config.get("type") == "Sequence" else [config]
    features: set[str] = set()
    if len(steps) == 2 and steps[0].get("type") == "Split":
        split, byte_level = steps
        pattern = split.get("pattern") or {}
        if "Regex" not in pattern or split.get("behavior") != "Isolated" or split.get("invert"):
            raise UnsupportedTokenizer(f"Split pre-tokenizer {split} (only Regex, Isolated, not inverted)")
        if byte_level.get("type") != "ByteLevel" or byte_level.get("use_regex", True):
            raise UnsupportedTokenizer("a Split pre-tokenizer must be followed by ByteLevel(use_regex=False)")
        split_pattern = pattern["Regex"]
        features.add(SPLIT_REGEX)
    elif len(steps) == 1 and steps[0].get("type") == "ByteLevel":
        byte_level = steps[0]
        split_pattern = GPT2_PATTERN
        if not byte_level.get("use_regex", True):
            features.add(NO_REGEX)
    else:
        kinds = [step.get("type") for step in steps]
        raise UnsupportedTokenizer(f"pre-tokenizer {kinds} (only ByteLevel, or Split then ByteLevel)")
    if byte_level.get("add_prefix_space", True):
        features.add(PREFIX_SPACE)
    return split_pattern, features


def _merges(raw: list[Any]) -> tuple[tuple[str, str], ...]:
    merges = []
    for merge in raw:
        parts = merge.split(" ") if isinstance(merge, str) else list(merge)
        if len(parts) != 2:
            raise UnsupportedTokenizer(f"merge {merge!r} is not a pair")
        merges.append((parts[0], parts[1]))
    return tuple(merges)


def byte_level_bpe(config: Mapping[str, Any]) -> ByteLevelBpe:
    """Describe a parsed tokenizer.json as a ``ByteLevelBpe``, or raise ``UnsupportedTokenizer`` saying why."""
    model = config.get("model") or {}
    if model.get("type") != "BPE":
        raise UnsupportedTokenizer(f"model {model.get('type')!r} (only BPE)")
    if model.get("dropout") not in (None, 0, 0.0):
        raise UnsupportedTokenizer(f"BPE dropout {model['dropout']} (ids are random)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise UnsupportedTokenizer(f"BPE {key}={model[key]!r}")
    if model.get("byte_fallback"):
        raise UnsupportedTokenizer("BPE byte_fallback (a SentencePiece-style BPE, not byte-level)")
    if config.get("normalizer") is not None:
        raise UnsupportedTokenizer(f"normalizer {config['normalizer'].get('type')!r}")
    for key in ("truncation", "padding"):
        if config.get(key) is not None:
            raise UnsupportedTokenizer(f"{key} is configured in the tokenizer.json")
    split_pattern, features = _pre_tokenizer(config.get("pre_tokenizer"))
    if model.get("ignore_merges"):
        features.add(IGNORE_MERGES)

    vocab: dict[str, int] = dict(model.get("vocab") or {})
    alphabet = set(byte_to_char().values())
    missing = alphabet - vocab.keys()
    if missing:
        raise UnsupportedTokenizer(f"{len(missing)} of the 256 byte-level symbols are not in the vocabulary")

    added = []
    for token in config.get("added_tokens") or []:
        flags = [name for name in ("single_word", "lstrip", "rstrip") if token.get(name)]
        if flags:
            raise UnsupportedTokenizer(f"added token {token['content']!r} sets {', '.join(flags)}")
        if token["content"] in vocab and vocab[token["content"]] != token["id"]:
            raise UnsupportedTokenizer(f"added token {token['content']!r} has another id in the vocabulary")
        if not token["content"]:
            raise UnsupportedTokenizer("an added token is empty")
        added.append(AddedToken(token["content"], int(token["id"]), bool(token.get("special"))))
    if any(not token.special for token in added):
        features.add(NONSPECIAL_ADDED)
    contents = [token.content for token in added]
    if any(a != b and a in b for a in contents for b in contents):
        features.add(NESTED_ADDED)

    return ByteLevelBpe(
        vocab, _merges(model.get("merges") or []), split_pattern, tuple(added), frozenset(features)
    )
