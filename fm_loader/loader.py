"""``fm_loader.Loader``: one loader core for every sample kind; deterministic, elastic, resumable batches.

The core owns what every kind shares: the global stream position and the state (:mod:`fm_loader.state`),
refusing other namespaces and revoked releases, worker sharding, prefetch, metrics and closing. What a batch
holds is the kind's builder (:mod:`fm_loader.kinds` maps each manifest kind to one): packed token rows
(:class:`fm_loader.builders.tokens.PackedTokens`), image-text and audio-text samples
(:mod:`fm_loader.builders.media`).

With ``num_workers > 0`` batches are built in torch ``DataLoader`` worker processes, worker ``w`` building
batches ``w, w + num_workers, ...``; the DataLoader's in-order round robin keeps the global order, each batch's
tensors come back through a reused ring of shared-memory slots (:mod:`fm_loader.handover`), and each batch
carries its build time and cache counters back to the metrics. With ``num_workers == 0`` a prefetch thread
builds the next ``prefetch`` batches while the trainer computes.

With ``delivery.device`` set to a CUDA device, host batches go through :class:`fm_loader.device.DeviceFeeder`
(pinned staging, side-stream copies, ``device_prefetch`` deep; a GPU image decode runs there too). Whatever
the path, the one loop in :meth:`Loader._handed` measures the wait at the trainer's ``next()`` and advances
the position only when the trainer receives a batch.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from dataclasses import replace
from typing import Any

import torch

from fm_loader.access import validate_namespaces
from fm_loader.builders.base import BatchBuilder, Built, Step
from fm_loader.builders.tokens import PinningError, check_pins
from fm_loader.device import CudaTransfer, DeviceFeeder, Transfer, resolve_device
from fm_loader.kinds import KINDS, PACKED_TOKENS
from fm_loader.metrics import LoaderMetrics
from fm_loader.options import (
    AccessOptions,
    DeliveryOptions,
    LoaderOptions,
    MediaOptions,
    ReadOptions,
    TokenOptions,
    group_options,
)
from fm_loader.prefetch import prefetched
from fm_loader.receipts import attach as attach_receipts
from fm_loader.resolve import resolve_source
from fm_loader.state import validate_state
from fm_loader.storage import ShardCache
from fm_loader.workers import worker_items

__all__ = ["Loader", "PinningError", "check_pins"]


class Loader:
    """Batches of one sample kind for one rank: fixed shapes, one global stream, a state of a few integers.

    Iterating yields this rank's slice of each global batch as a dict of tensors (packed tokens: see
    :mod:`fm_loader.batching`; media: see :mod:`fm_loader.builders.media`). The position is saved with
    :meth:`state_dict` and restored with :meth:`load_state_dict`, under any world size or worker count. Use as
    a context manager (or call :meth:`close`) to release open shards. Attributes of the kind's builder
    (``mixture``, ``stream``, ``seq_len``, ``buckets``, ``modality`` ...) read through the loader.

    Attributes:
        kind: The sample kind (``packed-tokens``, ``image-text``, ``audio-text``).
        global_batch_size: Rows per global batch, summed over all ranks.
        local_batch_size: Rows per batch on this rank (``global_batch_size // world_size``).
        rank, world_size: This process's rank, and the ranks sharing each global batch.
        seed: Seed of the shuffle.
        epochs: Epochs to iterate (``None``: endless); may be changed between iterations.
        epoch: Current epoch (part of the state); the kind's position keys (``rows_consumed``, or
            ``batches_emitted`` and ``samples_consumed``) read as attributes too.
        options: The option groups (:mod:`fm_loader.options`).
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
        epochs: int | None = 1,
        prefetch: int = 2,
        read: ReadOptions | None = None,
        access: AccessOptions | None = None,
        tokens: TokenOptions | None = None,
        media: MediaOptions | None = None,
        delivery: DeliveryOptions | None = None,
        run_id: str | None = None,
        receipts: str | None = None,
        **flat_options: Any,
    ) -> None:
        """Read the manifest(s) or mixture, check access and pins and plan the global stream (no shard is read).

        Args:
            source: A manifest path or URI (a local release folder means its ``manifest.json``), a mixture YAML
                path or URI (``.yaml``/``.yml``), a parsed mixture dict (:mod:`fm_loader.mixture`), a
                :class:`~fm_loader.manifest.DatasetManifest` or :class:`~fm_loader.media.manifest.MediaManifest`,
                or a list of media manifests of one kind (each one full pass per epoch, interleaved).
            global_batch_size: Rows per global batch over all ranks; divisible by ``world_size``.
            rank: This process's rank in ``[0, world_size)``; it gets rows ``[rank * B, (rank + 1) * B)`` of each
                global batch, ``B = global_batch_size // world_size``.
            world_size: Ranks sharing each global batch.
            seed: Seed of the shuffle; the global stream is a function of the sources and this seed only.
            num_workers: Build batches in this many torch ``DataLoader`` worker processes (needs a finite
                ``epochs``); 0 builds them in this process.
            expected_tokenizer_hash: If given, every source must have been tokenized with this tokenizer (the
                manifest's ``tokenizer_hash``, repeated as ``tokenizer_sha256`` in the card that
                ``fm card latest --name <dataset> --json`` prints).
            epochs: Epochs to iterate from epoch 0 (a restored state resumes inside them); ``None`` is endless.
            prefetch: Batches built ahead of the trainer: by a background thread when ``num_workers == 0`` (0
                builds each batch on demand), else the ``DataLoader``'s ``prefetch_factor`` (at least 1).
            read: Cache, remote storage, corrupt-row handling and prewarm (:class:`~fm_loader.options.ReadOptions`).
            access: Namespaces and revoked releases (:class:`~fm_loader.options.AccessOptions`).
            tokens: Packed-token pins and batch layout (:class:`~fm_loader.options.TokenOptions`).
            media: Buckets, caption width and audio padding (:class:`~fm_loader.options.MediaOptions`).
            delivery: Device batches, GPU image decode and the workers' hand-over
                (:class:`~fm_loader.options.DeliveryOptions`; ``device=None``, the default, yields host tensors).
            run_id: The training run, for read receipts (:mod:`fm_loader.receipts`); with ``receipts``.
            receipts: The storage root (local path or URI) that gets a read receipt per rank and checkpoint
                (``state_dict()``) and on ``close()``; default: ``FM_LOADER_RUN_ID`` / ``FM_LOADER_RECEIPTS``.
            **flat_options: The same options as flat keywords (``cache_dir=``, ``allow_revoked=``,
                ``extra_columns=``, ``buckets=``, ``device=`` ...), as earlier releases took them.

        Raises:
            ValueError: Invalid rank, world size or batch size, an invalid mixture or manifest, or media
                manifests of several kinds.
            PinningError: The sources disagree with each other or with the ``expected_*`` pins.
            NamespaceError: A source's namespace is not allowed.
            RevokedDatasetError: A source is revoked and ``allow_revoked`` is not set.
            TypeError: ``source`` is of an unsupported type, or an unknown keyword.
            FileNotFoundError: The manifest or mixture does not exist.
        """
        if global_batch_size <= 0 or world_size <= 0 or not 0 <= rank < world_size:
            raise ValueError(
                f"invalid rank {rank} / world_size {world_size} / global batch {global_batch_size}"
            )
        if global_batch_size % world_size:
            raise ValueError(
                f"global_batch_size {global_batch_size} is not divisible by world_size {world_size}"
            )
        self.options: LoaderOptions = group_options(
            {"read": read, "access": access, "tokens": tokens, "media": media, "delivery": delivery},
            flat_options,
        )
        self._config = dict(
            source=source,
            global_batch_size=global_batch_size,
            rank=rank,
            world_size=world_size,
            seed=seed,
            num_workers=num_workers,
            expected_tokenizer_hash=expected_tokenizer_hash,
            epochs=epochs,
            prefetch=prefetch,
            **{
                name: getattr(self.options, name)
                for name in ("read", "access", "tokens", "media", "delivery")
            },
            receipts="",  # DataLoader workers build batches; only this loader writes receipts
        )
        self.global_batch_size, self.rank, self.world_size = global_batch_size, rank, world_size
        self.local_batch_size = global_batch_size // world_size
        self.seed, self.num_workers, self.prefetch, self.epochs = seed, num_workers, prefetch, epochs
        self.expected_tokenizer_hash = expected_tokenizer_hash
        read_opts, access_opts = self.options.read, self.options.access
        self.cache = ShardCache(read_opts.cache_dir, read_opts.cache_budget_bytes, read_opts.storage_options)
        validate_namespaces(access_opts.allowed_namespaces)
        self.device = resolve_device(self.options.delivery.device)
        self.kind, resolved = self._resolve(source)
        self._builder: BatchBuilder = KINDS[self.kind].builder_class()(self, resolved)
        self.epoch = 0
        self._position = dict.fromkeys(self._builder.state.position, 0)
        self._metrics = LoaderMetrics()
        self._receipts = attach_receipts(self, run_id, receipts)

    def _resolve(self, source: Any) -> tuple[str, Any]:
        """The sample kind of ``source`` and what its builder reads (:func:`fm_loader.resolve.resolve_source`)."""
        return resolve_source(
            source, self.options.read.storage_options, self.options.access, type(self).__name__
        )

    def __getattr__(self, name: str) -> Any:
        """The kind's position keys (``rows_consumed`` ...) and its builder's attributes (``mixture`` ...)."""
        position = self.__dict__.get("_position")
        if position is not None and name in position:
            return position[name]
        builder = self.__dict__.get("_builder")
        try:
            if builder is None or name.startswith("__"):
                raise AttributeError(name)
            return getattr(builder, name)
        except AttributeError:
            kind = self.__dict__.get("kind", "")
            raise AttributeError(
                f"{type(self).__name__!r} object ({kind}) has no attribute {name!r}"
            ) from None

    # -- state -------------------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """Identifies the plan (data, order, seed and the kind's batch layout)."""
        return self._builder.fingerprint

    @property
    def epoch_rows(self) -> int:
        """Rows (samples) in one epoch of the global stream."""
        return self._builder.epoch_rows

    @property
    def epoch_samples(self) -> int:
        """:attr:`epoch_rows`, by the media kinds' name."""
        return self._builder.epoch_rows

    def state_dict(self) -> dict[str, Any]:
        """The position after the last batch handed out: plain JSON-serialisable values.

        Returns:
            ``{"format", "fingerprint", "seed", "epoch", ...}`` plus the kind's position keys (packed tokens:
            ``rows_consumed``; media: ``global_batch_size``, ``batches_emitted``, ``samples_consumed``).
        """
        state = self.state_dict_plain()
        if self._receipts is not None:
            self._receipts.checkpoint(state)  # queued: written by a background thread
        return state

    def state_dict_plain(self) -> dict[str, Any]:
        """:meth:`state_dict` without writing a read receipt."""
        spec = self._builder.state
        return {
            "format": spec.format,
            "fingerprint": self.fingerprint,
            "seed": self.seed,
            **self._builder.pins(),
            "epoch": self.epoch,
            **self._position,
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue from a position saved by :meth:`state_dict`, possibly under another world size.

        Args:
            state: A dict returned by :meth:`state_dict`.
            strict: If True, refuse a state saved for another stream (other data, seed or plan).

        Raises:
            ValueError: ``state`` is not a state of this kind (the message names the missing or invalid key and
                shows a valid state), another pinned value, a position past the end of this loader's epochs,
                or ``strict`` and its fingerprint or seed differ from this loader's.
        """
        builder = self._builder
        validate_state(state, builder.state, self.epochs, self.epoch_rows, builder.pins())
        if strict and (state["fingerprint"] != self.fingerprint or state["seed"] != self.seed):
            word = "stream" if self.kind == PACKED_TOKENS else "plan"
            raise ValueError(
                f"state belongs to another {word} (fingerprint {state['fingerprint']} seed {state['seed']}, this "
                f"loader has {self.fingerprint} seed {self.seed}); pass strict=False to continue anyway"
            )
        self.epoch = int(state["epoch"])
        self._position = {key: int(state[key]) for key in builder.state.position}

    # -- iteration ---------------------------------------------------------------------------------------
    def _steps(self) -> Iterator[Step]:
        return self._builder.steps(self.epoch, tuple(self._position.values()), self.epochs)

    def _next_positions(self) -> Iterator[Any]:
        """What each remaining batch is built from (packed tokens: ``(epoch, first global row)``)."""
        return (step.work for step in self._steps())

    def _schedule(self) -> list[Step]:
        if self.epochs is None:
            raise ValueError("an endless loader (epochs=None) has no finite schedule")
        return list(self._steps())

    def _advance(self, step: Step, built: Built) -> None:
        self.epoch = step.after[0]
        self._position = dict(zip(self._position, step.after[1], strict=True))
        m = self._metrics
        m.batches += 1
        m.rows += built.rows
        m.tokens += built.tokens
        m.bytes += built.bytes
        m.corrupt_rows_skipped += built.corrupt
        m.lost_rows += built.lost

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Yield this rank's batches from the current position to the end of the last epoch.

        The state advances as each batch is handed out, so :meth:`state_dict` taken between batches resumes
        right after the last one received.
        """
        items = self._iter_workers() if self.num_workers > 0 else self._iter_local()
        return self._builder.wrap(self._handed(items))

    def _transfer(self, device: torch.device) -> Transfer:
        """How host batches reach ``device`` (a seam: the CPU tests put a host transfer here)."""
        return CudaTransfer(device)

    def _handed(self, items: Generator[_Item, None, None]) -> Iterator[dict[str, Any]]:
        """The one hand-out loop: device delivery when asked, the wait timed at the trainer's ``next()``, the
        position advanced when the trainer receives the batch."""
        feeder = None
        if self.device is not None:
            feeder = DeviceFeeder(
                ((item[1].batch, item) for item in items),
                self._transfer(self.device),
                depth=self.options.delivery.device_prefetch,
                prepare=self._builder.device_stage,
                tagged=True,
                threaded=True,
            )
        try:
            while True:
                asked = self._metrics.ask()
                try:
                    if feeder is not None:
                        batch, (step, built, info) = next(feeder)
                    else:
                        step, built, info = next(items)
                        batch = built.batch
                except StopIteration:
                    return
                self._metrics.handed(asked, info["built_at"], info["build_s"])
                if info.get("cache"):
                    self._metrics.worker_cache.add(info["cache"])
                self._advance(step, built)
                yield batch
        finally:
            if feeder is not None:
                feeder.close()
            items.close()  # stops the prefetch thread or the workers when the trainer stops early

    def _built(self) -> Generator[_Item, None, None]:
        """(step, its batch, when it was finished and how long it took) for every remaining step."""
        for step in self._steps():
            t0 = time.monotonic()
            built = self._builder.build(step.work)
            built_at = time.monotonic()
            yield step, built, {"built_at": built_at, "build_s": built_at - t0}

    def _iter_local(self) -> Generator[_Item, None, None]:
        """Batches built in this process: on demand, or ``prefetch`` ahead by a thread."""
        items = prefetched(self._built(), self.prefetch) if self.prefetch > 0 else self._built()
        try:
            yield from items
        finally:
            items.close()

    def _worker_config(self) -> dict[str, Any]:
        """What a worker rebuilds its loader from: this one's, with the image decode already resolved here
        (a worker has no CUDA) and the hand-over ring's flags."""
        mode = self._builder.image_decode_mode  # GPU decode: workers hand over the compressed bytes
        delivery = replace(
            self.options.delivery, device=None, image_decode="bytes" if mode == "gpu" else mode
        )
        return {**self._config, "delivery": delivery, "num_workers": 0, "prefetch": 0}

    def _iter_workers(self) -> Generator[_Item, None, None]:
        """Batches built in ``num_workers`` DataLoader worker processes (:mod:`fm_loader.workers`)."""
        slots = max(1, self.prefetch) + self.options.delivery.device_prefetch + 3
        return worker_items(
            self._worker_config(),
            self._schedule(),
            self.num_workers,
            prefetch=self.prefetch,
            shm=self.options.delivery.handover == "shm",
            slots=slots,
            nice=self.options.delivery.worker_nice,
        )

    # -- reporting ---------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Throughput and stall counters since construction or :meth:`reset_metrics`, the same for every kind.

        Returns:
            Counts (``rows``, ``tokens``, ``bytes``, ``batches``, ``corrupt_rows_skipped``, and ``lost_rows``:
            those of them in missing shards), rates (``rows_per_s``, ``tokens_per_s``, ``bytes_per_s``) over
            ``elapsed_s`` (since the first request for a batch), the time the trainer waited in ``__next__``
            (``input_stall_s``, ``input_stall_fraction``), ``step_s_mean`` (mean interval between the trainer's
            requests), and once :meth:`set_compute_baseline` was given the trainer's compute-only step time,
            ``compute_baseline_s`` and the headline ``input_loss_fraction`` (``1 - baseline / step_s_mean``: the
            throughput input costs, see :mod:`fm_loader.metrics`), ``queue_depth_mean`` (batches ready when the trainer
            asked), ``build_s`` (time spent building batches, worker processes included) and the cache's
            ``cache_hits``, ``cache_misses``, ``cache_hit_rate``, ``cache_bytes_downloaded``,
            ``cache_fetch_wait_s``, ``cache_prewarmed`` and ``cache_evictions`` (worker processes' caches
            included). Media kinds add their names: ``samples``, ``samples_per_s``, ``caption_tokens``,
            ``corrupt_samples_skipped``. :class:`fm_loader.metrics.MetricsLogger` logs them every N steps.
        """
        return self._builder.named_metrics(self._metrics.snapshot(self.cache.stats))

    def reset_metrics(self) -> None:
        """Start the counters of :meth:`metrics` afresh (the cache's counters and the compute baseline stay)."""
        self._metrics = self._metrics.fresh()

    def set_compute_baseline(self, step_s: float | None) -> None:
        """The trainer's compute-only step time in seconds (:func:`fm_loader.metrics.measure_compute_baseline`),
        from which :meth:`metrics` reports ``input_loss_fraction``; ``None`` forgets it."""
        if step_s is not None and not step_s > 0:
            raise ValueError(f"a compute baseline is a positive number of seconds, got {step_s}")
        self._metrics.compute_baseline_s = step_s

    def __len__(self) -> int:
        """Batches left from the current position to the end of the last epoch.

        Raises:
            ValueError: The loader is endless (``epochs=None``).
        """
        return len(self._schedule())

    def close(self) -> None:
        """Close the shards held open (memory maps and files); with read receipts, write the last position's
        and wait for the queued ones."""
        receipts, self._receipts = self.__dict__.get("_receipts"), None
        if receipts is not None:
            receipts.close()
        self._builder.close()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_Item = tuple[Step, Built, dict[str, Any]]
