"""Packed-token batches: rows of ``T`` tokens gathered from memory-mapped shards into fixed-shape tensors.

Global batch ``k`` (counted from the current position) is rows ``[kG, (k+1)G)`` of the epoch's global stream
(:mod:`fm_loader.stream`); rank ``r`` of ``W`` gets the contiguous slice ``[r*G/W, (r+1)*G/W)``. The last batch
of an epoch is padded with empty rows (``sample_ids == -1``) so shapes never change. The position is
``rows_consumed`` of the epoch, so a state resumes under any world size, batch size or worker count.

A batch is built in one pass per output array: rows are checksummed (xxh3) and copied into a reused
``(B, T)`` buffer by a whole-batch gather (:mod:`fm_loader.gather`), then every derived field is computed for
the whole batch at once from the document lengths in the row index (:mod:`fm_loader.batching`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from fm_loader.access import check_access
from fm_loader.builders.base import BatchBuilder, Built, Step
from fm_loader.columns import validate_extra_columns
from fm_loader.gather import BatchAssembler
from fm_loader.mixture import Mixture, load_mixture
from fm_loader.prewarm import Prewarmer
from fm_loader.state import StateSpec
from fm_loader.stream import GlobalStream, RowRefs

if TYPE_CHECKING:
    from fm_loader.loader import Loader

STATE = StateSpec("fm_loader.state/1", position=("rows_consumed",), progress="rows_consumed")


class PinningError(ValueError):
    """The dataset was made with a different tokenizer / vocabulary / sequence length than the trainer expects.

    Also raised when the sources of a mixture disagree with each other on tokenizer or sequence length.
    """


def check_pins(
    mixture: Mixture,
    expected_tokenizer_hash: str | None,
    expected_vocab_size: int | None,
    seq_len: int | None,
) -> tuple[int, int]:
    """Refuse mixtures whose sources disagree with each other or with the trainer; returns (seq_len, vocab)."""
    first = mixture.sources[0]
    for src in mixture.sources:
        if expected_tokenizer_hash is not None and src.tokenizer_hash != expected_tokenizer_hash:
            raise PinningError(
                f"source {src.name!r} was tokenized with tokenizer {src.tokenizer_hash!r} but the trainer expects "
                f"{expected_tokenizer_hash!r}; refusing to start (re-tokenize the data or fix the pin)"
            )
        if expected_vocab_size is not None and src.vocab_size != expected_vocab_size:
            raise PinningError(
                f"source {src.name!r} has vocab_size {src.vocab_size} but the trainer expects {expected_vocab_size}"
            )
        if src.tokenizer_hash != first.tokenizer_hash:
            raise PinningError(
                f"sources {first.name!r} and {src.name!r} use different tokenizers "
                f"({first.tokenizer_hash!r} vs {src.tokenizer_hash!r})"
            )
        if src.seq_len != first.seq_len:
            raise PinningError(f"sources {first.name!r} and {src.name!r} have different seq_len")
    if seq_len is not None and seq_len != first.seq_len:
        raise PinningError(f"dataset seq_len is {first.seq_len} but the trainer expects {seq_len}")
    return first.seq_len, max(s.vocab_size for s in mixture.sources)


class PackedTokens(BatchBuilder):
    """Batches of packed token rows (keys, shapes and dtypes in :mod:`fm_loader.batching`).

    Attributes:
        mixture: The loaded :class:`fm_loader.mixture.Mixture`.
        stream: Its :class:`fm_loader.stream.GlobalStream`.
        seq_len: Row length ``T`` of the dataset, checked against the pins.
        vocab_size: Largest vocabulary size among the sources.
        max_docs: Documents per row the batch has room for (``cu_seqlens`` is ``(B, max_docs + 1)``).
    """

    state = STATE

    def __init__(self, loader: Loader, source: Any) -> None:
        """Load the manifest or mixture, check access and pins and plan the global stream (no shard is read)."""
        super().__init__(loader)
        opts, access = loader.options.tokens, loader.options.access
        columns = validate_extra_columns(opts.extra_columns)
        self.mixture = load_mixture(
            source, self.cache, opts.held_out_rows, opts.split, access.allowed_namespaces
        )
        check_access(self.mixture.sources, access.allowed_namespaces, access.allow_revoked)
        self.seq_len, self.vocab_size = check_pins(
            self.mixture, loader.expected_tokenizer_hash, opts.expected_vocab_size, opts.expected_seq_len
        )
        self.stream = GlobalStream(self.mixture, loader.seed)
        known = [s.max_docs_per_row for s in self.mixture.sources]
        self.max_docs = opts.max_docs_per_row or (max(known) if all(known) else self.seq_len)
        self._assembler = BatchAssembler(
            self.mixture,
            self.seq_len,
            self.max_docs,
            loader.options.read.skip_corrupt,
            input_ids_dtype=opts.input_ids_dtype,
            pooled_batches=loader.prefetch
            + 3,  # batches alive at once: the trainer's, the queued ones, the next
            extra_columns=columns,
        )
        self._token_bytes = 2 if self.vocab_size < 65536 else 4

    @property
    def fingerprint(self) -> str:
        return self.stream.fingerprint

    @property
    def epoch_rows(self) -> int:
        return self.stream.epoch_rows

    def steps(self, epoch: int, position: tuple[int, ...], epochs: int | None) -> Iterator[Step]:
        size = self.loader.global_batch_size
        (pos,) = position
        while epochs is None or epoch < epochs:
            if pos >= self.epoch_rows:
                epoch, pos = epoch + 1, 0
                continue
            after = (epoch, pos + size) if pos + size < self.epoch_rows else (epoch + 1, 0)
            yield Step(epoch, (epoch, pos), (after[0], (after[1],)))
            pos += size

    def _refs(self, epoch: int, start: int) -> RowRefs:
        loader = self.loader
        return self.stream.rows(epoch, start + loader.rank * loader.local_batch_size, loader.local_batch_size)

    def build(self, work: tuple[int, int]) -> Built:
        assembler = self._assembler
        corrupt, lost = assembler.corrupt_rows_skipped, assembler.lost_rows
        batch: dict[str, Any] = assembler.assemble(self._refs(*work))
        tokens, rows = assembler.last_counts
        return Built(
            batch,
            rows,
            tokens,
            tokens * self._token_bytes,
            assembler.corrupt_rows_skipped - corrupt,
            assembler.lost_rows - lost,
        )

    def batch_at(self, epoch: int, start: int) -> dict[str, torch.Tensor]:
        """Build one batch out of order, without changing the loader's position.

        Args:
            epoch: Epoch of the batch.
            start: Global row of that epoch where the global batch begins.

        Returns:
            This rank's slice of that global batch (the same dict of tensors that iteration yields).
        """
        return self.build((epoch, start)).batch

    def wrap(self, batches: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """Prewarm the remote shards of the next ``prewarm_rows`` rows while iterating (:mod:`fm_loader.prewarm`)."""
        loader = self.loader
        rows = loader.options.read.prewarm_rows
        if rows <= 0:
            return batches
        return self._prewarmed(batches, rows)

    def _prewarmed(self, batches: Iterator[dict[str, Any]], rows: int) -> Iterator[dict[str, Any]]:
        loader = self.loader
        warmer = Prewarmer(
            self.mixture,
            loader.seed,
            self.cache,
            rows,
            loader.global_batch_size,
            (loader.rank * loader.local_batch_size, loader.local_batch_size),
            loader._next_positions(),
            lambda: (loader.epoch, loader.rows_consumed),
        )
        warmer.start()
        try:
            yield from batches
        finally:
            warmer.stop()

    def close(self) -> None:
        self._assembler.close()
