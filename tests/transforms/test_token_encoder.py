"""The fast token encoders give exactly the pinned HF tokenizer's ids, or are not used.

Every backend ``build_encoder`` may choose is compared with HF ``tokenizers`` on real documents and on
adversarial strings; tokenizers a backend cannot reproduce (a normalizer, an unknown pre-tokenizer, a
vocabulary whose ranks disagree with its merges) fall back, and a backend that differs on the probes is
refused by the build-time self-test.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, pre_tokenizers

from fm_assets.transforms.tokens import backends as backends_module
from fm_assets.transforms.tokens.backends import BACKENDS, Backend, GigatokenEncoder
from fm_assets.transforms.tokens.encoder import HF, HFEncoder, build_encoder, first_difference
from fm_assets.transforms.tokens.flat import Flat, append_token, doc, flat_from_lists, select_docs
from fm_assets.transforms.tokens.merge_ranks import rank_merge, tiktoken_ranks
from fm_assets.transforms.tokens.probes import probe_strings, random_probes
from fm_assets.transforms.tokens.tokenizer_json import (
    NO_REGEX,
    PREFIX_SPACE,
    SPLIT_REGEX,
    UnsupportedTokenizer,
    byte_level_bpe,
    byte_to_char,
)

CL100K_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def sample_texts(real_sample: dict) -> list[str]:
    texts = []
    for path in sorted(Path(real_sample["dest"]).rglob("*.jsonl")):
        texts += [json.loads(line)["text"] for line in path.read_text().splitlines()]
    return texts


def adversarial(added: Sequence[str]) -> list[str]:
    """The build-time probes plus a different seeded set and long whitespace/repeat runs."""
    extra = ["\n" * 500, " " * 1000 + "x", "\t \n" * 200, "a" * 5000, "ab" * 2500, "1" * 999, "😀" * 300]
    return [*probe_strings(added), *random_probes(2000, seed=12345, extra=added), *extra]


def installed(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def backend_param(name: str):
    return pytest.param(name, marks=pytest.mark.skipif(not installed(name), reason=f"{name} not installed"))


ALL_BACKENDS = [backend_param(name) for name in BACKENDS]


def variant(tokenizer_file: Path, edit) -> Tokenizer:
    config = json.loads(tokenizer_file.read_text())
    edit(config)
    return Tokenizer.from_str(json.dumps(config))


def split_then_byte_level(config: dict) -> None:
    config["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": CL100K_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ],
    }


def assert_same_ids(reference: Flat, found: Flat, texts: Sequence[str]) -> None:
    differs = first_difference(reference, found)
    assert differs is None, f"document {differs} {texts[differs][:60]!r} differs"


@pytest.mark.parametrize("name", ALL_BACKENDS)
def test_backend_gives_hf_ids_on_real_text_and_adversarial_strings(name, tokenizer_file, real_sample):
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    choice = build_encoder(tokenizer, (name,))
    assert choice.backend == name, choice.rejected
    reference = HFEncoder(tokenizer)
    real = sample_texts(real_sample)
    assert len(real) >= 100 and sum(map(len, real)) > 100_000
    strings = adversarial(["<|endoftext|>", "<|pad|>"])
    for texts in (real, strings):
        assert_same_ids(reference.encode_flat(texts), choice.encoder.encode_flat(texts), texts)


@pytest.mark.parametrize("name", [backend_param("fastokens"), backend_param("gigatoken")])
def test_split_regex_tokenizers_give_hf_ids(name, tokenizer_file, real_sample):
    tokenizer = variant(tokenizer_file, split_then_byte_level)
    assert SPLIT_REGEX in byte_level_bpe(json.loads(tokenizer.to_str())).features
    choice = build_encoder(tokenizer, (name,))
    assert choice.backend == name, choice.rejected
    texts = [*sample_texts(real_sample)[:60], *adversarial(["<|endoftext|>", "<|pad|>"])]
    assert_same_ids(HFEncoder(tokenizer).encode_flat(texts), choice.encoder.encode_flat(texts), texts)


def test_split_regex_is_not_given_to_tiktoken(tokenizer_file):
    choice = build_encoder(variant(tokenizer_file, split_then_byte_level), ("tiktoken",))
    assert choice.backend == HF
    assert "split_regex" in choice.rejected["tiktoken"]


@pytest.mark.parametrize(
    "edit, why",
    [
        (lambda c: c.update(normalizer={"type": "NFC"}), "normalizer 'NFC'"),
        (lambda c: c.update(normalizer={"type": "Lowercase"}), "normalizer 'Lowercase'"),
        (
            lambda c: c.update(
                pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"}
            ),
            "pre-tokenizer ['Metaspace']",
        ),
        (lambda c: c["model"].update(dropout=0.1), "dropout"),
        (lambda c: c["added_tokens"][0].update(lstrip=True), "sets lstrip"),
    ],
    ids=["nfc", "lowercase", "metaspace", "dropout", "lstrip"],
)
def test_incompatible_tokenizer_falls_back_to_hf(tokenizer_file, edit, why, caplog):
    tokenizer = variant(tokenizer_file, edit)
    with caplog.at_level("INFO", logger="fm_assets.transforms.tokens.encoder"):
        choice = build_encoder(tokenizer)
    assert choice.backend == HF and isinstance(choice.encoder, HFEncoder)
    assert set(choice.rejected) == set(BACKENDS)
    assert all(why in reason for reason in choice.rejected.values()), choice.rejected
    assert "tokenizer encoder: hf" in caplog.text and why in caplog.text
    if "dropout" not in why:  # the fallback is HF itself: same ids by construction
        texts = probe_strings()
        assert_same_ids(HFEncoder(tokenizer).encode_flat(texts), choice.encoder.encode_flat(texts), texts)


def test_features_the_backend_lacks_are_refused_before_building(tokenizer_file):
    # gigatoken ignores ByteLevel(use_regex=False) and would mis-encode: it must not even be tried
    tokenizer = variant(
        tokenizer_file, lambda c: c["pre_tokenizer"].update(use_regex=False, add_prefix_space=True)
    )
    assert {NO_REGEX, PREFIX_SPACE} <= byte_level_bpe(json.loads(tokenizer.to_str())).features
    choice = build_encoder(tokenizer, ("gigatoken", "tiktoken"))
    assert choice.backend == HF
    assert "no_regex" in choice.rejected["gigatoken"] and "prefix_space" in choice.rejected["tiktoken"]


class ShiftedOnWhitespaceRuns:
    """An encoder that is right except after a run of two spaces (a plausible regex bug)."""

    backend = "shifted"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._hf = HFEncoder(tokenizer)

    def encode_flat(self, texts: Sequence[str]) -> Flat:
        values, offsets = self._hf.encode_flat(texts)
        values = values.copy()
        for i, text in enumerate(texts):
            if "  " in text and offsets[i + 1] > offsets[i]:
                values[offsets[i]] += 1
        return values, offsets


def test_self_test_refuses_a_backend_that_differs_on_a_probe(tokenizer_file, monkeypatch):
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    wrong = Backend(
        "shifted", frozenset(), lambda text, spec: ShiftedOnWhitespaceRuns(Tokenizer.from_str(text))
    )
    monkeypatch.setitem(backends_module.BACKENDS, "shifted", wrong)
    choice = build_encoder(tokenizer, ("shifted",))
    assert choice.rejected["shifted"].startswith("self-test: probe")
    assert choice.backend == HF


def test_a_backend_that_is_not_installed_is_skipped(tokenizer_file, monkeypatch):
    def missing(text, spec):
        raise ImportError("No module named 'fastokens'")

    monkeypatch.setitem(backends_module.BACKENDS, "fastokens", Backend("fastokens", frozenset(), missing))
    choice = build_encoder(Tokenizer.from_file(str(tokenizer_file)), ("fastokens",))
    assert choice.rejected["fastokens"].startswith("not installed")
    assert choice.backend == HF


def test_unknown_backend_name_is_an_error(tokenizer_file):
    with pytest.raises(ValueError, match="unknown tokenizer backends"):
        build_encoder(Tokenizer.from_file(str(tokenizer_file)), ("sentencepiece",))


def shortcut_tokenizer() -> Tokenizer:
    """A byte-level BPE where a rank-based BPE differs: "bc" merges first, so HF never makes "abc" from
    a + bc, while tiktoken would (the concatenation "abc" has a rank)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {char: i for i, char in enumerate(alphabet)}
    vocab.update({"bc": 256, "ab": 257, "abc": 258})
    config = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [["b", "c"], ["a", "b"], ["ab", "c"]]},
    }  # fmt: skip
    return Tokenizer.from_str(json.dumps(config))


def test_tiktoken_is_refused_when_ranks_and_merges_disagree():
    tokenizer = shortcut_tokenizer()
    spec = byte_level_bpe(json.loads(tokenizer.to_str()))
    assert tokenizer.encode("abc").ids == [64, 256]  # HF: a + bc, no merge (a, bc)
    ranks = {bytes([byte]): byte for byte in range(256)}
    ranks.update({b"bc": 256, b"ab": 257, b"abc": 258})
    assert rank_merge(b"abc", ranks, below=10**9) == [b"abc"]  # what tiktoken would give
    with pytest.raises(UnsupportedTokenizer, match="not merge-consistent"):
        tiktoken_ranks(spec)
    choice = build_encoder(tokenizer, ("tiktoken",))
    assert choice.backend == HF and "not merge-consistent" in choice.rejected["tiktoken"]


@pytest.mark.parametrize("name", [backend_param("fastokens"), backend_param("gigatoken")])
def test_merge_list_backends_follow_merges_not_ranks(name):
    tokenizer = shortcut_tokenizer()
    choice = build_encoder(tokenizer, (name,))
    assert choice.backend == name, choice.rejected
    texts = ["abc", "xabc ab abcabc", "bcab abca"]
    assert_same_ids(HFEncoder(tokenizer).encode_flat(texts), choice.encoder.encode_flat(texts), texts)


def test_trained_tokenizer_is_a_plain_byte_level_bpe(tokenizer_file):
    spec = byte_level_bpe(json.loads(tokenizer_file.read_text()))
    assert spec.features == frozenset()
    assert [(t.content, t.special) for t in spec.added] == [("<|endoftext|>", True), ("<|pad|>", True)]
    assert set(byte_to_char().values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert len(set(byte_to_char().values())) == 256


@pytest.mark.parametrize("name", [*ALL_BACKENDS, HF])
def test_chosen_encoder_pickles_for_worker_processes(name, tokenizer_file):
    choice = build_encoder(Tokenizer.from_file(str(tokenizer_file)), (name,))
    assert choice.backend == name, choice.rejected
    copy = pickle.loads(pickle.dumps(choice))
    texts = probe_strings()
    assert copy.backend == name and copy.rejected == choice.rejected
    assert_same_ids(choice.encoder.encode_flat(texts), copy.encoder.encode_flat(texts), texts)


@pytest.mark.skipif(not installed("gigatoken"), reason="gigatoken not installed")
def test_gigatoken_rebuild_keeps_the_ids(tokenizer_file, real_sample):
    text = tokenizer_file.read_text()
    encoder = GigatokenEncoder(text, rebuild_tokens=2_000)  # rebuilt after almost every batch
    texts = sample_texts(real_sample)[:40]
    reference = HFEncoder(Tokenizer.from_str(text))
    builds = []
    build = encoder._build
    encoder._build = lambda: builds.append(1) or build()
    for start in range(0, len(texts), 8):
        batch = texts[start : start + 8]
        assert_same_ids(reference.encode_flat(batch), encoder.encode_flat(batch), batch)
        assert encoder._tokens_since_build < 2_000  # the cache never outlives the budget
    assert len(builds) >= 2


def test_flat_helpers():
    ids = [[5, 6, 7], [], [8]]
    flat = flat_from_lists(ids)
    with_eos = append_token(flat, 0)
    assert [doc(with_eos, i).tolist() for i in range(3)] == [[5, 6, 7, 0], [0], [8, 0]]
    kept = select_docs(with_eos, np.array([True, False, True]))
    assert kept[0].tolist() == [5, 6, 7, 0, 8, 0] and kept[1].tolist() == [0, 4, 6]
    empty = append_token(flat_from_lists([]), 0)
    assert len(empty[0]) == 0 and empty[1].tolist() == [0]
    assert first_difference(flat, flat_from_lists([[5, 6, 7], [], [9]])) == 2
    assert first_difference(flat, flat_from_lists([[5, 6, 7], []])) == 0


def test_encoder_for_chooses_once_per_tokenizer_and_process(monkeypatch, tokenizer_file):
    from fm_assets.transforms.tokens import encoder as encoder_module

    built: list[Tokenizer] = []

    def counting(tokenizer: Tokenizer, preference: Sequence[str] = (HF,)):
        built.append(tokenizer)
        return build_encoder(tokenizer, (HF,))

    monkeypatch.setattr(encoder_module, "build_encoder", counting)
    monkeypatch.setattr(encoder_module, "_CHOICES", {})
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    first = encoder_module.encoder_for("sha-a", tokenizer)
    assert encoder_module.encoder_for("sha-a", tokenizer) is first  # a later stage run reuses the choice
    assert len(built) == 1
    encoder_module.encoder_for("sha-b", tokenizer)  # another tokenizer.json is chosen for on its own
    assert len(built) == 2
