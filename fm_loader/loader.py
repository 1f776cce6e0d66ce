"""``fm_loader.Loader``: deterministic, elastic, resumable batches of packed rows.

Global batch ``k`` (counted from the current position) is rows ``[kG, (k+1)G)`` of the epoch's global
stream (:mod:`fm_loader.stream`); rank ``r`` of ``W`` gets the contiguous slice ``[r*G/W, (r+1)*G/W)``.
The last batch of an epoch is padded with empty rows (``sample_ids == -1``) so shapes never change.

State is ``{fingerprint, seed, epoch, rows_consumed}``: restoring it under any world size, batch size
or worker count continues the same global stream, and seeking costs O(shards), not O(rows seen).
With ``num_workers > 0`` batches are built in torch ``DataLoader`` worker processes, worker ``w`` building
batches ``w, w + num_workers, ...``; the DataLoader's in-order round robin keeps the global order.
With ``num_workers == 0`` a prefetch thread builds the next ``prefetch`` batches while the trainer computes.

A batch is built in one pass per output array: rows are checksummed (xxh3) and copied from memory-mapped
shards into a reused ``(B, T)`` buffer by a whole-batch gather (:mod:`fm_loader.gather`), then every derived
field is computed for the whole batch at once from the document lengths in the row index
(:mod:`fm_loader.batching`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from fm_loader.access import DEFAULT_NAMESPACES, check_access, validate_namespaces
from fm_loader.columns import validate_extra_columns
from fm_loader.gather import BatchAssembler
from fm_loader.metrics import LoaderMetrics, cache_delta
from fm_loader.mixture import Mixture, load_mixture
from fm_loader.prewarm import Prewarmer
from fm_loader.storage import ShardCache
from fm_loader.stream import GlobalStream, RowRefs

logger = logging.getLogger(__name__)
STATE_FORMAT = "fm_loader.state/1"


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


class _WorkerBatches(torch.utils.data.IterableDataset):
    """Runs inside DataLoader workers: worker ``w`` builds every ``num_workers``-th batch of the schedule."""

    def __init__(self, loader: Loader, schedule: list[tuple[int, int]]) -> None:
        self.config = loader._config
        self.schedule = schedule

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], dict[str, Any]]]:
        """Yields (batch, what the main process counts: build time, real tokens and rows, cache counters)."""
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        local = Loader(**{**self.config, "num_workers": 0, "prefetch": 0})
        try:
            before = replace(local.cache.stats)
            for epoch, start in self.schedule[wid::nw]:
                t0 = time.monotonic()
                batch, tokens, rows = local._build_counted(epoch, start)
                built_at = time.monotonic()
                now = replace(local.cache.stats)
                counts = {"built_at": built_at, "build_s": built_at - t0, "tokens": tokens, "rows": rows}
                yield batch, {**counts, "cache": cache_delta(now, before)}
                before = now
        finally:
            local.close()


STATE_KEYS = {"format": str, "fingerprint": str, "seed": int, "epoch": int, "rows_consumed": int}


def validate_state(state: Any, epochs: int | None, epoch_rows: int) -> None:
    """Refuse a loader state that is not one ``state_dict`` wrote, or that points past the stream's end."""
    example = f"{{'format': {STATE_FORMAT!r}, 'fingerprint': '<16 hex>', 'seed': 0, 'epoch': 0, 'rows_consumed': 0}}"
    if not isinstance(state, dict):
        raise ValueError(f"a loader state is a dict like {example}, got {type(state).__name__}")
    if state.get("format") != STATE_FORMAT:
        raise ValueError(
            f"not an fm_loader state (format {state.get('format')!r}, expected {STATE_FORMAT!r}): {example}"
        )
    for key, kind in STATE_KEYS.items():
        if key not in state:
            raise ValueError(f"loader state has no {key!r}; a state_dict() looks like {example}")
        if not isinstance(state[key], kind) or isinstance(state[key], bool):
            raise ValueError(f"loader state {key!r} must be {kind.__name__}, got {state[key]!r}")
    if state["epoch"] < 0 or not 0 <= state["rows_consumed"] <= epoch_rows:
        raise ValueError(
            f"loader state position (epoch {state['epoch']}, row {state['rows_consumed']}) is outside the stream "
            f"(epochs of {epoch_rows} rows)"
        )
    position = (state["epoch"], state["rows_consumed"])
    if epochs is not None and position > (epochs, 0):
        raise ValueError(
            f"loader state is past the end: epoch {state['epoch']} row {state['rows_consumed']}, but this loader "
            f"has {epochs} epoch(s) of {epoch_rows} rows; nothing would be left to read (raise epochs=, or start "
            "from a fresh state)"
        )
    if epochs is not None and position == (epochs, 0):
        logger.warning("loader state is at the end of its %d epoch(s): this loader yields no batch", epochs)


class Loader:
    """Deterministic, elastic, resumable batches of packed rows for one rank.

    Iterating yields this rank's slice of each global batch as a dict of fixed-shape tensors (keys, shapes
    and dtypes in :mod:`fm_loader.batching`); see the module docstring for the ordering contract. The
    position is saved with :meth:`state_dict` and restored with :meth:`load_state_dict`, under any world size,
    batch size or worker count. Use as a context manager (or call :meth:`close`) to release open shards.

    A yielded batch's tensors share memory with a small pool of reused buffers: a buffer is written again
    only after every reference to the earlier batch's arrays is gone, so keeping a batch is safe.

    Attributes:
        global_batch_size: Rows per global batch, summed over all ranks.
        local_batch_size: Rows per batch on this rank (``global_batch_size // world_size``).
        rank: This process's rank.
        world_size: Number of ranks sharing each global batch.
        seed: Seed of the shuffle.
        epochs: Epochs to iterate (``None``: endless); may be changed between iterations.
        epoch: Current epoch (part of the state).
        rows_consumed: Global rows of the current epoch already handed out (part of the state).
        seq_len: Row length ``T`` of the dataset, checked against the pins.
        vocab_size: Largest vocabulary size among the sources.
        max_docs: Documents per row the batch has room for (``cu_seqlens`` is ``(B, max_docs + 1)``).
        mixture: The loaded :class:`fm_loader.mixture.Mixture`.
        cache: The :class:`fm_loader.storage.ShardCache` holding local copies of remote files.
    """

    def __init__(
        self,
        source: Any,
        global_batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        num_workers: int = 0,
        expected_tokenizer_hash: str | None = None,
        *,
        expected_vocab_size: int | None = None,
        expected_seq_len: int | None = None,
        epochs: int | None = 1,
        prefetch: int = 2,
        skip_corrupt: bool = False,
        max_docs_per_row: int | None = None,
        cache_dir: str | None = None,
        cache_budget_bytes: int = 64 << 30,
        storage_options: dict[str, Any] | None = None,
        input_ids_dtype: torch.dtype = torch.int32,
        allowed_namespaces: Collection[str] = DEFAULT_NAMESPACES,
        allow_revoked: bool = False,
        extra_columns: Mapping[str, int] | None = None,
        held_out_rows: int = 0,
        split: str = "train",
        prewarm_rows: int = 0,
    ) -> None:
        """Load the manifest or mixture, check the pins and plan the global stream (no shard is read yet).

        Args:
            source: What to read: a manifest path or URI, a mixture YAML path or URI (``.yaml``/``.yml``),
                a :class:`~fm_loader.manifest.DatasetManifest`, or an already parsed mixture dict (see
                :mod:`fm_loader.mixture`).
            global_batch_size: Rows per global batch, summed over all ranks; must be divisible by
                ``world_size``.
            rank: This process's rank, in ``[0, world_size)``; it gets rows
                ``[rank * B, (rank + 1) * B)`` of each global batch, with ``B = global_batch_size // world_size``.
            world_size: Number of ranks sharing each global batch.
            seed: Seed of the shuffle; the global stream is a function of the sources and this seed only.
            num_workers: When positive, batches are built in this many torch ``DataLoader`` worker processes
                (needs a finite ``epochs``); 0 builds them in this process.
            expected_tokenizer_hash: If given, every source must have been tokenized with this tokenizer.
            expected_vocab_size: If given, every source must have this vocabulary size.
            expected_seq_len: If given, the dataset's ``seq_len`` must equal it.
            epochs: Number of epochs to iterate, counted from epoch 0 (a restored state resumes inside
                them); ``None`` iterates forever (only with ``num_workers == 0``, and ``len()`` is undefined).
            prefetch: Batches built ahead of the trainer: by a background thread when ``num_workers == 0``
                (0 builds each batch on demand), else the ``DataLoader``'s ``prefetch_factor`` (at least 1).
            skip_corrupt: If True, a row that fails its checksum twice becomes a padding row
                (``sample_ids == -1``) and is counted in :meth:`metrics`; if False it raises
                :class:`~fm_loader.sources.CorruptRowError`.
            max_docs_per_row: Documents per row the batch has room for (width of ``cu_seqlens`` minus
                one). Defaults to the largest ``max_docs_per_row`` of the sources when all of them know
                it, else ``seq_len``.
            cache_dir: Folder for local copies of remote files; defaults to ``<tempdir>/fm_loader_cache``.
            cache_budget_bytes: Size bound of that folder; least recently used files are evicted first.
            storage_options: Passed to fsspec for remote manifests, mixtures and shards, e.g.
                ``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}}``.
            input_ids_dtype: ``torch.int32`` (``nn.Embedding`` takes it) or ``torch.int64``. ``labels`` is
                always int64 for ``cross_entropy``.
            allowed_namespaces: Namespaces this trainer may read; a source from another one raises
                :class:`~fm_loader.access.NamespaceError`. A manifest says its namespace; an MDS source takes
                the ``namespace:`` of its mixture entry (default ``cloud``).
            allow_revoked: Read revoked releases anyway (a warning is logged); otherwise one raises
                :class:`~fm_loader.access.RevokedDatasetError`.
            extra_columns: Per-token columns to add to every batch, name -> fill value (e.g.
                ``{"ast_depth": -1, "chunk_id": 0}``): each is a ``(B, T)`` int32 tensor holding the values
                of rows whose shards store the column (aligned with ``input_ids``) and the fill everywhere
                else (sources without it, padding). See :mod:`fm_loader.columns`.
            held_out_rows: Rows of every source kept out of training for per-dataset validation (whole
                shards chosen from the source's content alone, see :mod:`fm_loader.holdout`); pass the same
                number to :func:`fm_loader.validation.validation_loaders`. 0 trains on everything.
            split: ``"train"``, or ``"validation:<source name>"`` for that source's held-out rows (what
                :func:`~fm_loader.validation.validation_loaders` builds).
            prewarm_rows: When positive, a background thread fetches the remote shards of this rank's rows
                among the next ``prewarm_rows`` global rows into the cache while iterating, and keeps them
                pinned until the window has passed them (:mod:`fm_loader.prewarm`).

        Raises:
            ValueError: Invalid rank, world size or batch size; an unsupported ``input_ids_dtype``; or an
                invalid mixture or manifest.
            PinningError: The sources disagree with each other or with the ``expected_*`` pins.
            NamespaceError: A source's namespace is not in ``allowed_namespaces``.
            RevokedDatasetError: A source is revoked and ``allow_revoked`` is False.
            TypeError: ``source`` is of an unsupported type.
            FileNotFoundError: The manifest or mixture does not exist.
            ImportError: A remote URI's fsspec filesystem (e.g. s3fs) is not installed.
        """
        if global_batch_size <= 0 or world_size <= 0 or not 0 <= rank < world_size:
            raise ValueError(
                f"invalid rank {rank} / world_size {world_size} / global batch {global_batch_size}"
            )
        if global_batch_size % world_size:
            raise ValueError(
                f"global_batch_size {global_batch_size} is not divisible by world_size {world_size}"
            )
        columns = validate_extra_columns(extra_columns)
        self._config = dict(
            source=source,
            global_batch_size=global_batch_size,
            rank=rank,
            world_size=world_size,
            seed=seed,
            num_workers=num_workers,
            expected_tokenizer_hash=expected_tokenizer_hash,
            expected_vocab_size=expected_vocab_size,
            expected_seq_len=expected_seq_len,
            epochs=epochs,
            prefetch=prefetch,
            skip_corrupt=skip_corrupt,
            max_docs_per_row=max_docs_per_row,
            cache_dir=cache_dir,
            cache_budget_bytes=cache_budget_bytes,
            storage_options=storage_options,
            input_ids_dtype=input_ids_dtype,
            allowed_namespaces=allowed_namespaces,
            allow_revoked=allow_revoked,
            extra_columns=extra_columns,
            held_out_rows=held_out_rows,
            split=split,
            prewarm_rows=prewarm_rows,
        )
        self.global_batch_size = global_batch_size
        self.rank, self.world_size = rank, world_size
        self.local_batch_size = global_batch_size // world_size
        self.num_workers, self.prefetch, self.epochs = num_workers, prefetch, epochs
        self.prewarm_rows = prewarm_rows
        self.cache = ShardCache(cache_dir, cache_budget_bytes, storage_options)
        validate_namespaces(allowed_namespaces)
        self.mixture = load_mixture(source, self.cache, held_out_rows, split, allowed_namespaces)
        check_access(self.mixture.sources, allowed_namespaces, allow_revoked)
        self.seq_len, self.vocab_size = check_pins(
            self.mixture, expected_tokenizer_hash, expected_vocab_size, expected_seq_len
        )
        self.stream = GlobalStream(self.mixture, seed)
        known = [s.max_docs_per_row for s in self.mixture.sources]
        self.max_docs = max_docs_per_row or (max(known) if all(known) else self.seq_len)
        self._assembler = BatchAssembler(
            self.mixture,
            self.seq_len,
            self.max_docs,
            skip_corrupt,
            input_ids_dtype=input_ids_dtype,
            pooled_batches=prefetch + 3,  # batches alive at once: the trainer's, the queued ones, the next
            extra_columns=columns,
        )
        self.seed = seed
        self.epoch = 0
        self.rows_consumed = 0
        self._metrics = LoaderMetrics()
        self._token_bytes = 2 if self.vocab_size < 65536 else 4

    # -- state -------------------------------------------------------------------------------------------
    @property
    def epoch_rows(self) -> int:
        """Rows in one epoch of the global stream (the sum of the sources' per-epoch counts)."""
        return self.stream.epoch_rows

    def state_dict(self) -> dict[str, Any]:
        """The position after the last batch handed out.

        Returns:
            ``{"format", "fingerprint", "seed", "epoch", "rows_consumed"}``: plain JSON-serialisable values.
        """
        return {
            "format": STATE_FORMAT,
            "fingerprint": self.stream.fingerprint,
            "seed": self.seed,
            "epoch": self.epoch,
            "rows_consumed": self.rows_consumed,
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue from a position saved by :meth:`state_dict`, possibly under another world size.

        Args:
            state: A dict returned by :meth:`state_dict`.
            strict: If True, refuse a state saved for another stream (other data or seed).

        Raises:
            ValueError: ``state`` is not an fm_loader state (the message names the missing or invalid key and
                shows a valid state), points past the end of this loader's epochs, or ``strict`` and its
                fingerprint or seed differ from this loader's.
        """
        validate_state(state, self.epochs, self.epoch_rows)
        if strict and (state["fingerprint"] != self.stream.fingerprint or state["seed"] != self.seed):
            raise ValueError(
                f"state belongs to another stream (fingerprint {state['fingerprint']} seed {state['seed']}, this "
                f"loader has {self.stream.fingerprint} seed {self.seed}); pass strict=False to continue anyway"
            )
        self.epoch, self.rows_consumed = int(state["epoch"]), int(state["rows_consumed"])

    # -- iteration ---------------------------------------------------------------------------------------
    def _schedule(self) -> list[tuple[int, int]]:
        """(epoch, first global row) of every remaining batch, from the current state."""
        if self.epochs is None:
            raise ValueError("an endless loader (epochs=None) has no finite schedule")
        out: list[tuple[int, int]] = []
        epoch, pos = self.epoch, self.rows_consumed
        while epoch < self.epochs:
            if pos >= self.epoch_rows:
                epoch, pos = epoch + 1, 0
                continue
            out.append((epoch, pos))
            pos += self.global_batch_size
        return out

    def _next_positions(self) -> Iterator[tuple[int, int]]:
        epoch, pos = self.epoch, self.rows_consumed
        while self.epochs is None or epoch < self.epochs:
            if pos >= self.epoch_rows:
                epoch, pos = epoch + 1, 0
                continue
            yield epoch, pos
            pos += self.global_batch_size

    def _refs(self, epoch: int, start: int) -> RowRefs:
        return self.stream.rows(epoch, start + self.rank * self.local_batch_size, self.local_batch_size)

    def _build(self, epoch: int, start: int) -> dict[str, torch.Tensor]:
        return self._assembler.assemble(self._refs(epoch, start))

    def batch_at(self, epoch: int, start: int) -> dict[str, torch.Tensor]:
        """Build one batch out of order, without changing the loader's position.

        Args:
            epoch: Epoch of the batch.
            start: Global row of that epoch where the global batch begins.

        Returns:
            This rank's slice of that global batch (the same dict of tensors that iteration yields).
        """
        return self._build(epoch, start)

    def _build_counted(self, epoch: int, start: int) -> tuple[dict[str, torch.Tensor], int, int]:
        """:meth:`_build`, plus the batch's real tokens and rows (for the metrics)."""
        batch = self._build(epoch, start)
        tokens, rows = self._assembler.last_counts
        return batch, tokens, rows

    def _advance(
        self,
        epoch: int,
        start: int,
        batch: dict[str, torch.Tensor],
        tokens: int | None = None,
        rows: int | None = None,
    ) -> None:
        self.epoch, self.rows_consumed = epoch, start + self.global_batch_size
        if self.rows_consumed >= self.epoch_rows:
            self.epoch, self.rows_consumed = epoch + 1, 0
        if tokens is None or rows is None:
            tokens = int(batch["valid_token_count"].numpy().sum())
            rows = int(np.count_nonzero(batch["sample_ids"].numpy() >= 0))
        m = self._metrics
        m.batches += 1
        m.rows += rows
        m.tokens += tokens
        m.bytes += tokens * self._token_bytes
        m.corrupt_rows_skipped = self._assembler.corrupt_rows_skipped
        m.lost_rows = self._assembler.lost_rows

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        """Yield this rank's batches from the current position to the end of the last epoch.

        The state advances as each batch is handed out, so :meth:`state_dict` taken between batches resumes
        right after the last one received.
        """
        if self.num_workers > 0:
            batches = self._iter_workers()
        elif self.prefetch > 0:
            batches = self._iter_prefetch()
        else:
            batches = self._iter_inline()
        return self._prewarmed(batches) if self.prewarm_rows > 0 else batches

    def _prewarmed(self, batches: Iterator[dict[str, torch.Tensor]]) -> Iterator[dict[str, torch.Tensor]]:
        warmer = Prewarmer(
            self.mixture,
            self.seed,
            self.cache,
            self.prewarm_rows,
            self.global_batch_size,
            (self.rank * self.local_batch_size, self.local_batch_size),
            self._next_positions(),
            lambda: (self.epoch, self.rows_consumed),
        )
        warmer.start()
        try:
            yield from batches
        finally:
            warmer.stop()

    def _iter_inline(self) -> Iterator[dict[str, torch.Tensor]]:
        for epoch, start in self._next_positions():
            asked = self._metrics.ask()
            batch, tokens, rows = self._build_counted(epoch, start)
            built_at = time.monotonic()
            self._metrics.handed(asked, built_at, built_at - asked)
            self._advance(epoch, start, batch, tokens, rows)
            yield batch

    def _iter_prefetch(self) -> Iterator[dict[str, torch.Tensor]]:
        ready: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        done = object()

        def produce() -> None:
            try:
                for epoch, start in self._next_positions():
                    t0 = time.monotonic()
                    batch, tokens, rows = self._build_counted(epoch, start)
                    built_at = time.monotonic()
                    item = (epoch, start, batch, tokens, rows, built_at, built_at - t0)
                    while not stop.is_set():
                        try:
                            ready.put(item, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
                ready.put(done)
            except BaseException as exc:  # handed to the consumer, raised there
                ready.put(exc)

        worker = threading.Thread(target=produce, name="fm_loader-prefetch", daemon=True)
        worker.start()
        try:
            while True:
                asked = self._metrics.ask()
                item = ready.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                epoch, start, batch, tokens, rows, built_at, build_s = item
                self._metrics.handed(asked, built_at, build_s)
                self._advance(epoch, start, batch, tokens, rows)
                yield batch
        finally:
            stop.set()
            worker.join(timeout=5)

    def _iter_workers(self) -> Iterator[dict[str, torch.Tensor]]:
        schedule = self._schedule()
        if not schedule:
            return
        data = torch.utils.data.DataLoader(
            _WorkerBatches(self, schedule),
            batch_size=None,
            num_workers=self.num_workers,
            prefetch_factor=max(1, self.prefetch),
            persistent_workers=False,
        )
        it = iter(data)
        for epoch, start in schedule:
            asked = self._metrics.ask()
            batch, info = next(it)
            self._metrics.handed(asked, info["built_at"], info["build_s"])
            self._metrics.worker_cache.add(info["cache"])
            self._advance(epoch, start, batch, info["tokens"], info["rows"])
            yield batch

    # -- reporting ---------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Throughput and stall counters since construction or :meth:`reset_metrics`.

        Returns:
            Counts (``rows``, ``tokens``, ``bytes``, ``batches``, ``corrupt_rows_skipped``, and ``lost_rows``:
            those of them in missing shards), rates (``rows_per_s``, ``tokens_per_s``, ``bytes_per_s``) over
            ``elapsed_s`` (since the first request for a batch), the time the trainer waited in ``__next__``
            (``input_stall_s``, ``input_stall_fraction``), ``queue_depth_mean`` (batches ready when the trainer
            asked), ``build_s`` (time spent building batches, worker processes included) and the cache's
            ``cache_hits``, ``cache_misses``, ``cache_hit_rate``, ``cache_bytes_downloaded``,
            ``cache_fetch_wait_s`` (readers waiting on downloads), ``cache_prewarmed`` and ``cache_evictions``
            (worker processes' caches included). :class:`fm_loader.metrics.MetricsLogger` logs them every N
            steps.
        """
        return self._metrics.snapshot(self.cache.stats)

    def reset_metrics(self) -> None:
        """Start the counters of :meth:`metrics` afresh (the cache's counters keep running)."""
        self._metrics = LoaderMetrics()

    def __len__(self) -> int:
        """Batches left from the current position to the end of the last epoch.

        Raises:
            ValueError: The loader is endless (``epochs=None``).
        """
        return len(self._schedule())

    def close(self) -> None:
        """Close the shards held open (memory maps and files)."""
        self._assembler.close()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
