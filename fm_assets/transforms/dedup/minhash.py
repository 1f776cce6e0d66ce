"""Vectorised MinHash over word n-grams: tokenising, shingle hashing, signatures, band hashes.

Everything is batch-at-a-time: a pyarrow string array goes in, numpy arrays come out. Tokens are
runs of letters/digits/marks, lower-cased; characters of scripts written without spaces (Han, kana,
Thai, Lao, Khmer, Myanmar) are each a token of their own, so n-grams over them are character n-grams.
A document shorter than ``ngram`` tokens yields one shingle made of all its tokens; an empty one
yields none (its signature is all ``EMPTY_VALUE`` and it never enters the LSH index).

The permutation family is ``h_i(x) = (a_i * x + b_i) mod 2**64`` on a mixed 64-bit shingle hash,
keeping the high 32 bits (multiply-add-shift). Because taking the high bits is monotone, the minimum is
taken on the full 64-bit values and shifted once at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

EMPTY_VALUE = np.uint32(0xFFFFFFFF)
_NO_SPACE_SCRIPTS = r"(\p{Han}|\p{Hiragana}|\p{Katakana}|\p{Thai}|\p{Lao}|\p{Khmer}|\p{Myanmar})"
_NON_ASCII_SEPARATOR = r"[^\x00-\x7F\p{L}\p{N}\p{M}]"  # ASCII separators are handled by bytes.translate
_CHUNK_COLUMNS = 8192  # shingles per (num_perm x chunk) work matrix: 8 MiB at 128 permutations
_U64 = np.uint64


def _splitmix64(values: np.ndarray) -> np.ndarray:
    """Bijective 64-bit finaliser; spreads polynomial combinations over all bits."""
    z = values.astype(_U64, copy=True)
    z ^= z >> _U64(30)
    z *= _U64(0xBF58476D1CE4E5B9)
    z ^= z >> _U64(27)
    z *= _U64(0x94D049BB133111EB)
    z ^= z >> _U64(31)
    return z


def _as_string_array(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), type=pa.large_string())
    if pa.types.is_string(texts.type):
        texts = texts.cast(pa.large_string())
    return pc.fill_null(texts, "")


def _ascii_separator_table() -> bytes:
    table = bytearray(range(256))
    for byte in range(128):
        if not (ord("a") <= byte <= ord("z") or ord("0") <= byte <= ord("9")):
            table[byte] = ord(" ")
    return bytes(table)


_ASCII_SEPARATORS = _ascii_separator_table()


def _separated(lowered: pa.Array) -> pa.Array:
    """Turn every separator into an ASCII space and isolate characters of no-space scripts.

    ASCII bytes go through one ``bytes.translate`` (fast path); only documents holding non-ASCII bytes
    take the Unicode regex path, which gives the same result on their ASCII parts.
    """
    _, offsets_buf, data_buf = lowered.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[lowered.offset : lowered.offset + len(lowered) + 1]
    lo, hi = int(offsets[0]), int(offsets[-1])
    raw = data_buf.to_pybytes()[lo:hi] if data_buf is not None else b""
    translated = pa.Array.from_buffers(
        lowered.type,
        len(lowered),
        [
            lowered.buffers()[0],
            pa.py_buffer((offsets - lo).astype(np.int64).tobytes()),
            pa.py_buffer(raw.translate(_ASCII_SEPARATORS)),
        ],
    )
    if len(raw) == 0:
        return translated
    non_ascii_bytes = np.flatnonzero(np.frombuffer(raw, dtype=np.uint8) >= 0x80)
    non_ascii_docs = np.unique(np.searchsorted(offsets - lo, non_ascii_bytes, side="right") - 1)
    if len(non_ascii_docs) == 0:
        return translated
    subset = translated.take(pa.array(non_ascii_docs))
    subset = pc.replace_substring_regex(subset, _NON_ASCII_SEPARATOR, " ")
    subset = pc.replace_substring_regex(subset, _NO_SPACE_SCRIPTS, r" \1 ")
    order = np.arange(len(lowered), dtype=np.int64)
    order[non_ascii_docs] = len(lowered) + np.arange(len(non_ascii_docs))
    return pa.concat_arrays([translated, subset]).take(pa.array(order))


def tokenize(texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """All tokens of the batch, flattened, and the index of the document each came from."""
    arr = _as_string_array(texts)
    pieces = pc.ascii_split_whitespace(_separated(pc.utf8_lower(arr)))
    list_offsets = pieces.offsets.to_numpy()
    parents = np.repeat(np.arange(len(arr), dtype=np.int64), np.diff(list_offsets))
    tokens = pieces.values.slice(int(list_offsets[0]), int(list_offsets[-1] - list_offsets[0]))
    keep = pc.greater(pc.binary_length(tokens), 0)
    return pc.filter(tokens, keep), parents[keep.to_numpy(zero_copy_only=False)]


def _token_hashes(tokens: pa.Array, seed: int) -> np.ndarray:
    """64-bit hash per token; only distinct tokens are hashed in Python (Zipf makes them few)."""
    if len(tokens) == 0:
        return np.empty(0, dtype=_U64)
    encoded = pc.dictionary_encode(tokens)
    uniques = encoded.dictionary.to_pylist()
    table = np.fromiter(
        (xxhash.xxh3_64_intdigest(t.encode(), seed) for t in uniques), dtype=_U64, count=len(uniques)
    )
    return table[encoded.indices.to_numpy(zero_copy_only=False)]


def _ngram_multipliers(ngram: int, seed: int) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(seed + 7919))
    return rng.integers(1, 2**63, size=ngram, dtype=np.int64).astype(_U64) * _U64(2) + _U64(1)


@dataclass(frozen=True)
class Shingles:
    """CSR layout: shingle hashes of document i are ``hashes[offsets[i]:offsets[i+1]]``."""

    hashes: np.ndarray  # uint64
    offsets: np.ndarray  # int64, len = docs + 1

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def of(self, i: int) -> np.ndarray:
        return self.hashes[self.offsets[i] : self.offsets[i + 1]]


def shingle_hashes(
    texts: Sequence[str | None] | pa.Array | pa.ChunkedArray, ngram: int = 5, seed: int = 1
) -> Shingles:
    """Hash every word n-gram of every document (order-sensitive polynomial, then splitmix)."""
    arr = _as_string_array(texts)
    n_docs = len(arr)
    tokens, parents = tokenize(arr)
    token_hash = _token_hashes(tokens, seed)
    n_tokens = len(token_hash)
    doc_tokens = np.bincount(parents, minlength=n_docs).astype(np.int64)
    doc_start = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(doc_tokens, out=doc_start[1:])
    if n_tokens == 0:
        return Shingles(np.empty(0, dtype=_U64), np.zeros(n_docs + 1, dtype=np.int64))

    positions = np.arange(n_tokens, dtype=np.int64)
    tokens_left = doc_start[parents + 1] - positions  # tokens from here to the end of the document
    is_doc_start = positions == doc_start[parents]
    valid = (tokens_left >= ngram) | (is_doc_start & (doc_tokens[parents] < ngram))
    span = np.minimum(tokens_left, ngram)

    starts = np.flatnonzero(valid)
    span = span[starts]
    padded = np.concatenate([token_hash, np.zeros(ngram, dtype=_U64)])
    multipliers = _ngram_multipliers(ngram, seed)
    combined = span.astype(_U64)  # length tag: a short document's single shingle differs from an n-gram
    for j in range(ngram):
        term = padded[starts + j] * multipliers[j]
        short = span <= j
        if short.any():  # only documents shorter than ngram have spans below ngram
            term[short] = 0
        combined += term
    hashes = _splitmix64(combined)

    per_doc = np.bincount(parents[valid], minlength=n_docs).astype(np.int64)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(per_doc, out=offsets[1:])
    return Shingles(hashes, offsets)


def permutation_params(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(0, 2**63, size=num_perm, dtype=np.int64).astype(_U64) * _U64(2) + _U64(1)
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.int64).astype(_U64) * _U64(2)
    return a, b


def signatures_from_shingles(shingles: Shingles, num_perm: int = 128, seed: int = 1) -> np.ndarray:
    """(docs, num_perm) uint32 MinHash signatures; documents without shingles get EMPTY_VALUE."""
    counts = shingles.counts()
    n_docs = len(counts)
    out = np.full((n_docs, num_perm), EMPTY_VALUE, dtype=np.uint32)
    total = len(shingles.hashes)
    if total == 0:
        return out
    a, b = permutation_params(num_perm, seed)
    nonempty = np.flatnonzero(counts > 0)
    starts = shingles.offsets[nonempty]
    # Pieces = documents cut at chunk boundaries; min per piece, then min of pieces per document.
    chunk_starts = np.arange(0, total, _CHUNK_COLUMNS, dtype=np.int64)
    piece_starts = np.union1d(starts, chunk_starts)
    piece_mins = np.empty((len(piece_starts), num_perm), dtype=_U64)
    work = np.empty((num_perm, _CHUNK_COLUMNS), dtype=_U64)
    a_col, b_col = a[:, None], b[:, None]
    for chunk_lo in chunk_starts:
        chunk_hi = min(chunk_lo + _CHUNK_COLUMNS, total)
        width = chunk_hi - chunk_lo
        block = work[:, :width]
        np.multiply(a_col, shingles.hashes[None, chunk_lo:chunk_hi], out=block)
        np.add(block, b_col, out=block)
        lo, hi = np.searchsorted(piece_starts, [chunk_lo, chunk_hi])
        local = piece_starts[lo:hi] - chunk_lo
        piece_mins[lo:hi] = np.minimum.reduceat(block, local, axis=1).T
    first_piece = np.searchsorted(piece_starts, starts)
    doc_mins = np.minimum.reduceat(piece_mins, first_piece, axis=0)
    out[nonempty] = (doc_mins >> _U64(32)).astype(np.uint32)
    return out


@dataclass(frozen=True)
class MinHasher:
    """Signature computer with fixed parameters; cheap to construct, safe to ship to executors."""

    num_perm: int = 128
    ngram: int = 5
    seed: int = 1

    def shingles(self, texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> Shingles:
        return shingle_hashes(texts, self.ngram, self.seed)

    def signatures(self, texts: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> np.ndarray:
        return signatures_from_shingles(self.shingles(texts), self.num_perm, self.seed)


def band_hashes(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(docs, bands) int64 hash of each band's ``rows`` signature values (band index mixed in)."""
    if bands * rows > signatures.shape[1]:
        raise ValueError(f"bands*rows={bands * rows} exceeds num_perm={signatures.shape[1]}")
    banded = signatures[:, : bands * rows].reshape(len(signatures), bands, rows).astype(_U64)
    acc = np.broadcast_to(np.arange(bands, dtype=_U64) + _U64(0x9E3779B97F4A7C15), banded.shape[:2]).copy()
    for r in range(rows):
        acc = _splitmix64(acc * _U64(0x100000001B3) + banded[:, :, r])
    return acc.view(np.int64)


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray | float:
    """Fraction of equal signature values (row-wise for 2-D input)."""
    equal = np.asarray(sig_a) == np.asarray(sig_b)
    return equal.mean(axis=-1)


def jaccard_of_sets(a: np.ndarray, b: np.ndarray) -> float:
    return jaccard_of_unique(np.unique(a), np.unique(b))


def jaccard_of_unique(ua: np.ndarray, ub: np.ndarray) -> float:
    """Jaccard of two sorted arrays of distinct values (``np.unique`` output)."""
    if len(ua) == 0 and len(ub) == 0:
        return 1.0
    inter = len(np.intersect1d(ua, ub, assume_unique=True))
    return inter / (len(ua) + len(ub) - inter)


def exact_jaccard_pairs(
    texts_a: Sequence[str | None] | pa.Array,
    texts_b: Sequence[str | None] | pa.Array,
    ngram: int = 5,
    seed: int = 1,
) -> np.ndarray:
    """Exact Jaccard of the n-gram shingle sets of aligned text pairs (float64 per pair)."""
    sh_a = shingle_hashes(texts_a, ngram, seed)
    sh_b = shingle_hashes(texts_b, ngram, seed)
    return np.array([jaccard_of_sets(sh_a.of(i), sh_b.of(i)) for i in range(len(sh_a.offsets) - 1)])


def shingle_sets(
    texts: Sequence[str | None] | pa.Array | pa.ChunkedArray, ngram: int = 5, seed: int = 1
) -> list[np.ndarray]:
    """Each text's distinct shingle hashes, sorted (``np.unique`` of :func:`shingle_hashes`' rows): what
    :func:`jaccard_of_unique` compares."""
    shingles = shingle_hashes(texts, ngram, seed)
    return [np.unique(shingles.of(i)) for i in range(len(shingles.offsets) - 1)]


def shingle_sets_task(task: tuple[list[str | None], int, int]) -> list[np.ndarray]:
    """:func:`shingle_sets` of ``(texts, ngram, seed)``: one chunk of texts, on a worker process."""
    texts, ngram, seed = task
    return shingle_sets(texts, ngram, seed)
