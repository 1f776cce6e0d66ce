"""Eval-set decontamination: an index of hashed word n-grams of the eval texts, and overlap checks.

Texts are normalised (``normalize_text``), lowercased and split into Unicode word tokens (``\\w+``),
so punctuation, case and whitespace differences do not hide an overlap. Each word is hashed with
xxh3-64 and an n-gram key is a polynomial combination of its words' hashes (mod 2**64), computed
with numpy; the index is the sorted array of distinct keys, so a lookup is a binary search.

Word n-grams do not suit unspaced scripts (zh, ja, th): there a whole clause is one ``\\w+`` token.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import xxhash

from fm_assets.transforms.text.normalize import normalize_text

DEFAULT_N = 13  # as in GPT-3's contamination study
DEFAULT_EVAL_FILE = "eval_python_tutorial.jsonl.gz"
_TOKEN = re.compile(r"\w+")
_MULT = np.uint64(0x100000001B3)
NGRAM_SCHEME = "xxh3-64/poly-0x100000001b3/nfc-lower-w+"  # part of the fingerprint: change it, change this


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(normalize_text(text).lower())


def ngram_hashes(text: str, n: int) -> np.ndarray:
    """uint64 key of every word n-gram of ``text`` (empty when it has fewer than n words)."""
    words = tokenize(text)
    if len(words) < n:
        return np.empty(0, dtype=np.uint64)
    distinct = set(words)
    vocab = dict(
        zip(distinct, map(xxhash.xxh3_64_intdigest, map(str.encode, distinct)), strict=True)
    )  # UTF-8
    word_hashes = np.fromiter(map(vocab.__getitem__, words), dtype=np.uint64, count=len(words))
    count = len(words) - n + 1
    keys = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i in range(n):
            keys = keys * _MULT + word_hashes[i : i + count]
    return keys


@dataclass(frozen=True)
class ContaminationIndex:
    n: int
    hashes: np.ndarray  # sorted, distinct uint64 n-gram keys

    @classmethod
    def build(cls, texts: Iterable[str], n: int = DEFAULT_N) -> ContaminationIndex:
        parts = [ngram_hashes(text, n) for text in texts]
        keys = np.unique(np.concatenate(parts)) if parts else np.empty(0, dtype=np.uint64)
        return cls(n=n, hashes=keys.astype(np.uint64))

    def __len__(self) -> int:
        return len(self.hashes)

    @cached_property
    def _buckets(self) -> np.ndarray:
        """One flag per value of a key's low bits, set for the index's keys (about 16 buckets per key, 1K-16M):
        a text's key whose bucket is not set cannot be in the index, so most skip the binary search."""
        bits = min(24, max(10, (16 * len(self.hashes)).bit_length()))
        flags = np.zeros(1 << bits, dtype=bool)
        flags[self.hashes & np.uint64((1 << bits) - 1)] = True
        return flags

    def fingerprint(self) -> str:
        """sha256 (hex, 16 chars) of n, the hashing scheme and every key: the stage-key input."""
        digest = hashlib.sha256(f"{NGRAM_SCHEME}|n={self.n}|".encode())
        digest.update(np.ascontiguousarray(self.hashes, dtype="<u8").tobytes())
        return digest.hexdigest()[:16]

    def check(self, text: str) -> tuple[int, float]:
        """(n-grams of ``text`` found in the index, their fraction of all its n-grams)."""
        keys = ngram_hashes(text, self.n)
        if len(keys) == 0 or len(self.hashes) == 0:
            return 0, 0.0
        buckets = self._buckets
        candidates = keys[buckets[keys & np.uint64(len(buckets) - 1)]]
        pos = np.searchsorted(self.hashes, candidates)
        pos[pos == len(self.hashes)] = 0
        matches = int(np.count_nonzero(self.hashes[pos] == candidates))
        return matches, matches / len(keys)

    def save(self, path: Path) -> None:
        np.savez_compressed(Path(path), n=np.int64(self.n), hashes=self.hashes)

    @classmethod
    def load(cls, path: Path) -> ContaminationIndex:
        with np.load(Path(path)) as data:
            return cls(n=int(data["n"]), hashes=data["hashes"].astype(np.uint64))


def load_eval_texts(name: str = DEFAULT_EVAL_FILE) -> list[dict]:
    """The eval items shipped in ``fm_assets/data`` (see the README there for origin and licence)."""
    raw = resources.files("fm_assets").joinpath("data", name).read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


@lru_cache(maxsize=4)
def load_default_eval_index(n: int = DEFAULT_N) -> ContaminationIndex:
    """Index over the shipped eval set (cached per process)."""
    return ContaminationIndex.build((item["text"] for item in load_eval_texts()), n=n)


@dataclass(frozen=True)
class BenchmarkIndex:
    """One ``ContaminationIndex`` over every registered benchmark, plus one per benchmark for attribution.

    A document is checked once against the combined index; only a document that matches is looked up in
    each benchmark's index to say which benchmarks it overlaps (removals are counted per benchmark).
    """

    combined: ContaminationIndex
    per_benchmark: tuple[tuple[str, ContaminationIndex], ...]

    @classmethod
    def build(cls, benchmarks: Iterable[tuple[str, Iterable[str]]], n: int = DEFAULT_N) -> BenchmarkIndex:
        indexes = tuple((name, ContaminationIndex.build(texts, n=n)) for name, texts in benchmarks)
        keys = [index.hashes for _, index in indexes]
        combined = np.unique(np.concatenate(keys)) if keys else np.empty(0, dtype=np.uint64)
        return cls(ContaminationIndex(n=n, hashes=combined.astype(np.uint64)), indexes)

    @property
    def n(self) -> int:
        return self.combined.n

    def __len__(self) -> int:
        return len(self.combined)

    def fingerprint(self) -> str:
        """Changes when any benchmark's n-grams, a benchmark's name or the hashing scheme changes."""
        names = "|".join(f"{name}={index.fingerprint()}" for name, index in self.per_benchmark)
        return hashlib.sha256(f"{self.combined.fingerprint()}|{names}".encode()).hexdigest()[:16]

    def check(self, text: str) -> tuple[int, float]:
        return self.combined.check(text)

    def attribute(self, text: str) -> dict[str, int]:
        """Matching n-grams per benchmark (benchmarks with none left out)."""
        found = {}
        for name, index in self.per_benchmark:
            matches, _ = index.check(text)
            if matches:
                found[name] = matches
        return found
