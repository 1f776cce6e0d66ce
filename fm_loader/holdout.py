"""Per-dataset validation slices: a fixed held-out part of each source, kept out of the training stream.

The held-out part of a source is a function of the source alone (its fingerprint: shard hashes and row
counts) and the number of rows asked for, never of the seed, the world size or the run: shards are ranked by
the xxh3 of their own content hash (``Source.shard_key``: a manifest shard's sha256) and taken in that order
until they hold ``rows`` rows; the last one taken is cut to its first rows so the slice has exactly ``rows``.
A shard's rank does not depend on the other shards, so a later release that adds shards keeps most of the
slice (it changes only where a new shard ranks before the old ones). Training (``Loader(..., held_out_rows=rows)``) reads
every other shard (the rest of that last shard is read by neither), so no held-out row is ever trained on.
Holding out whole shards keeps the training stream's shuffle and O(shards) seek unchanged.
"""

from __future__ import annotations

import hashlib

import numpy as np
import xxhash

from fm_loader.sources import ShardRows, Source

TRAIN = "train"
VALIDATION_PREFIX = "validation:"


class SubsetSource(Source):
    """Some shards of another source, in the base's order; the last one may be cut to its first rows."""

    def __init__(self, base: Source, shards: list[int], rows: list[int], role: str) -> None:
        self.base = base
        self.shards = list(shards)
        self.role = role
        self.name = base.name
        self.seq_len = base.seq_len
        self.vocab_size = base.vocab_size
        self.tokenizer_hash = base.tokenizer_hash
        self.max_docs_per_row = base.max_docs_per_row
        self.namespace = base.namespace
        self.revoked = base.revoked
        self.origin = base.origin
        self.tar_token_dtype = base.tar_token_dtype
        self.shard_rows = np.asarray(rows, dtype=np.int64)
        whole = [int(n) == int(base.shard_rows[s]) for s, n in zip(self.shards, rows, strict=True)]
        self._whole = all(whole)

    @property
    def fingerprint(self) -> str:
        text = f"{self.base.fingerprint}|{self.role}|{self.shards}|{self.shard_rows.tolist()}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def tokens(self) -> int | None:
        shard_tokens = self.base.shard_tokens
        if shard_tokens is None or not self._whole:
            return None
        return int(sum(shard_tokens[s] for s in self.shards))

    def open_shard(self, shard: int) -> ShardRows:
        return self.base.open_shard(self.shards[shard])

    def shard_label(self, shard: int) -> str:
        return self.base.shard_label(self.shards[shard])

    def shard_files(self, shard: int) -> list[str]:
        return self.base.shard_files(self.shards[shard])

    def shard_key(self, shard: int) -> str:
        return self.base.shard_key(self.shards[shard])


def _ranked_shards(source: Source) -> list[int]:
    keys = [
        xxhash.xxh3_64_intdigest(source.shard_key(shard).encode()) for shard in range(len(source.shard_rows))
    ]
    return sorted(range(len(keys)), key=lambda shard: (keys[shard], shard))


def split_source(source: Source, rows: int) -> tuple[SubsetSource, SubsetSource]:
    """(training part, validation part) of ``source`` with ``rows`` rows held out.

    Raises:
        ValueError: ``rows`` is not positive, or holding it out would leave no shard to train on.
    """
    if rows <= 0:
        raise ValueError(f"held_out_rows must be a positive number of rows per source, got {rows}")
    held: list[int] = []
    taken = 0
    for shard in _ranked_shards(source):
        if taken >= rows:
            break
        held.append(shard)
        taken += int(source.shard_rows[shard])
    held_set = set(held)
    train = [s for s in range(len(source.shard_rows)) if s not in held_set]
    if taken < rows or not any(int(source.shard_rows[s]) for s in train):
        raise ValueError(
            f"source {source.name!r} ({source.origin}) has {source.rows} rows in {len(source.shard_rows)} shards: "
            f"holding out {rows} rows (whole shards) would leave nothing to train on; ask for fewer rows"
        )
    last = held[-1]  # the last shard taken gives only the rows still needed
    held.sort()
    held_rows = [int(source.shard_rows[s]) for s in held]
    held_rows[held.index(last)] -= taken - rows
    training = SubsetSource(source, train, [int(source.shard_rows[s]) for s in train], TRAIN)
    validation = SubsetSource(source, held, held_rows, f"{VALIDATION_PREFIX}{rows}")
    return training, validation


def apply_split(sources: list[Source], held_out_rows: int, split: str) -> list[Source]:
    """The sources a loader reads for ``split``: every source's training part (``"train"``), or the one
    validation part of ``"validation:<source name>"``; ``held_out_rows == 0`` reads the sources whole.

    Raises:
        ValueError: An unknown split, a validation split without ``held_out_rows``, a name no source (or more
            than one) has, or a source too small to hold out from.
    """
    if split != TRAIN and not split.startswith(VALIDATION_PREFIX):
        raise ValueError(f"split is 'train' or 'validation:<source name>', got {split!r}")
    if not held_out_rows:
        if split != TRAIN:
            raise ValueError(f"split {split!r} needs held_out_rows > 0 (the size of each validation slice)")
        return sources
    if split == TRAIN:
        return [split_source(src, held_out_rows)[0] for src in sources]
    name = split[len(VALIDATION_PREFIX) :]
    matches = [src for src in sources if src.name == name]
    if len(matches) != 1:
        names = [src.name for src in sources]
        raise ValueError(
            f"split {split!r}: {len(matches)} sources are named {name!r} (sources: {names}); give each mixture "
            "entry a distinct 'name:'"
        )
    return [split_source(matches[0], held_out_rows)[1]]
