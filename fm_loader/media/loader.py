"""``MediaLoader``: deterministic, elastic, resumable image-text and audio-text batches for one rank.

The global stream of samples is the text loader's (:class:`fm_loader.stream.GlobalStream`); which samples
form global batch ``k`` is decided by :mod:`fm_loader.media.plan` (one aspect-ratio bucket per image batch;
consecutive samples per audio batch). Rank ``r`` of ``W`` takes the contiguous slice ``[r*G/W, (r+1)*G/W)``
of every global batch, so the ranks' slices concatenate to the same global batches under any world size.

Batch keys (``B = G / W`` samples of this rank; ``L`` = ``max_caption_tokens``):

=============== ================ ==========================================================================
images          (B, 3, H, W) u8  image-text only: RGB, cropped to the bucket's aspect ratio and resized
bucket          () int64         image-text only: the bucket index (``H, W = loader.buckets.shapes[bucket]``)
audio           (B, S) float32   audio-text only: mono waveform, zero after its length
audio_mask      (B, S) bool      audio-text only: ``True`` on real frames
audio_lengths   (B,) int64       audio-text only: real frames per sample
caption_ids     (B, L) int32     the sample's ``caption_tokens`` (0 after their end); ``L`` may be 0
caption_mask    (B, L) bool      ``True`` on real caption tokens
valid           (B,) bool        ``False`` for padding (end of epoch) and skipped corrupt samples
sample_ids      (B,) int64       ``source << 48 | sample index in the source``; -1 for padding
text            list[str]        captions / transcripts ("" where not valid)
=============== ================ ==========================================================================

``S`` is the longest clip of the *global* batch (every rank has the same shape), or ``audio_max_frames``
when given (longer clips are cut; a fixed ``S`` keeps compiled steps from recompiling).

State: ``{format, fingerprint, seed, global_batch_size, epoch, batches_emitted, samples_consumed}``. Restoring
it under any world size or worker count continues the identical global batches (seek cost: see
:mod:`fm_loader.media.plan`). The global batch size is part of the plan, so it cannot change on resume.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch

from fm_loader.media.buckets import DEFAULT_BUCKETS, BucketSet
from fm_loader.media.decode import decode_audio, decode_image
from fm_loader.media.errors import CorruptSampleError, check_release
from fm_loader.media.manifest import MediaManifest
from fm_loader.media.plan import ROW, SAMPLE_ID, SHARD, SOURCE, BucketPlanner, FixedPlanner, PlannedBatch
from fm_loader.media.prefetch import prefetched
from fm_loader.media.sources import MediaSource
from fm_loader.metrics import LoaderMetrics
from fm_loader.mixture import Mixture
from fm_loader.sources import CorruptShardError, Source
from fm_loader.storage import ShardCache
from fm_loader.stream import GlobalStream, RowRefs

logger = logging.getLogger(__name__)
STATE_FORMAT = "fm_loader.media-state/1"
STATE_KEYS = {
    "format": str,
    "fingerprint": str,
    "seed": int,
    "global_batch_size": int,
    "epoch": int,
    "batches_emitted": int,
    "samples_consumed": int,
}


@dataclass(frozen=True)
class BatchSpec:
    """Everything needed to build this rank's part of one global batch (picklable, for worker processes).

    Attributes:
        planned: The global batch's place in the plan (its refs are the whole global batch).
        refs: This rank's rows of ``planned.refs``.
        shape: ``(H, W)`` of the bucket for images, ``(S,)`` padded frames for audio.
    """

    planned: PlannedBatch
    refs: np.ndarray
    shape: tuple[int, ...]


def load_manifests(source: Any, storage_options: dict[str, Any] | None) -> list[MediaManifest]:
    """A manifest path/URI, a :class:`MediaManifest`, or a list of them -> the manifests."""
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    if not items:
        raise ValueError("MediaLoader needs at least one media manifest")
    out = []
    for item in items:
        if isinstance(item, MediaManifest):
            out.append(item)
        elif isinstance(item, (str, os.PathLike)):
            out.append(MediaManifest.load(str(item), storage_options))
        else:
            raise TypeError(f"unsupported media source {item!r}: give a manifest path, URI or MediaManifest")
    return out


def validate_state(state: Any, epochs: int | None, epoch_samples: int, batch_size: int) -> None:
    """Refuse a state that :meth:`MediaLoader.state_dict` did not write, or that does not fit this loader."""
    example = (
        f"{{'format': {STATE_FORMAT!r}, 'fingerprint': '<16 hex>', 'seed': 0, 'global_batch_size': 64, "
        "'epoch': 0, 'batches_emitted': 0, 'samples_consumed': 0}"
    )
    if not isinstance(state, dict):
        raise ValueError(f"a media loader state is a dict like {example}, got {type(state).__name__}")
    if state.get("format") != STATE_FORMAT:
        raise ValueError(
            f"not a media loader state (format {state.get('format')!r}, expected {STATE_FORMAT!r})"
        )
    for key, kind in STATE_KEYS.items():
        if key not in state:
            raise ValueError(f"media loader state has no {key!r}; a state_dict() looks like {example}")
        if not isinstance(state[key], kind) or isinstance(state[key], bool):
            raise ValueError(f"media loader state {key!r} must be {kind.__name__}, got {state[key]!r}")
    if state["global_batch_size"] != batch_size:
        raise ValueError(
            f"the state was saved with global_batch_size {state['global_batch_size']}, this loader has {batch_size}: "
            "bucketed batches depend on it, so resume with the same global batch size (any world size works)"
        )
    if (
        state["epoch"] < 0
        or state["batches_emitted"] < 0
        or not 0 <= state["samples_consumed"] <= epoch_samples
    ):
        raise ValueError(
            f"media loader state position is outside the stream (epochs of {epoch_samples} samples)"
        )
    if epochs is not None and state["epoch"] > epochs:
        raise ValueError(
            f"media loader state is at epoch {state['epoch']}, past this loader's {epochs} epoch(s)"
        )


class MediaLoader:
    """Image-text or audio-text batches for one rank (see the module docstring for keys and guarantees).

    Attributes:
        modality: ``"image-text"`` or ``"audio-text"``.
        buckets: The aspect-ratio buckets (image-text).
        sample_rate: Sample rate of every clip (audio-text; 0 for images).
        max_caption_tokens: Width ``L`` of ``caption_ids``.
        epoch, batches_emitted, samples_consumed: The position (see :meth:`state_dict`).
    """

    def __init__(
        self,
        source: Any,
        global_batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        epochs: int | None = 1,
        num_workers: int = 0,
        skip_corrupt: bool = False,
        allowed_namespaces: Sequence[str] = ("cloud",),
        allow_revoked: bool = False,
        buckets: BucketSet = DEFAULT_BUCKETS,
        max_caption_tokens: int | None = None,
        audio_max_frames: int | None = None,
        *,
        window_samples: int = 8192,
        prefetch: int = 2,
        cache_dir: str | None = None,
        cache_budget_bytes: int = 64 << 30,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        """Load and check the manifests and plan the global stream (no tar is opened yet).

        Args:
            source: A media manifest path or URI, a :class:`MediaManifest`, or a list of them (one modality;
                each contributes one full pass per epoch, interleaved in proportion).
            global_batch_size: Samples per global batch over all ranks; divisible by ``world_size``.
            rank: This process's rank in ``[0, world_size)``.
            world_size: Ranks sharing each global batch.
            seed: Seed of the shuffle.
            epochs: Epochs to iterate from epoch 0 (``None``: endless, only with ``num_workers == 0``).
            num_workers: Build batches in this many torch ``DataLoader`` worker processes (0: in this process).
            skip_corrupt: A sample that fails its checksum twice, does not decode, or lies in a missing shard
                becomes ``valid == False`` and is counted in :meth:`metrics`, instead of raising
                :class:`~fm_loader.media.errors.CorruptSampleError` / ``CorruptShardError``.
            allowed_namespaces: Namespaces this trainer may read; others raise ``NamespaceError``.
            allow_revoked: Read a revoked release instead of raising ``RevokedDatasetError``.
            buckets: Aspect-ratio buckets of image-text batches.
            max_caption_tokens: Width of ``caption_ids``; longer captions are cut. Default: the longest
                caption in the manifests' shape summaries (0 when the samples have no ``caption_tokens``).
            audio_max_frames: Pad (and cut) every audio batch to this many frames instead of the longest clip
                of the global batch.
            window_samples: Samples per shuffle window (see :mod:`fm_loader.order`).
            prefetch: Batches built ahead of the trainer: by a background thread when ``num_workers == 0``
                (0 builds each batch on demand), else the ``DataLoader``'s ``prefetch_factor`` (at least 1).
            cache_dir: Folder for local copies of remote shards.
            cache_budget_bytes: Size bound of that folder.
            storage_options: Passed to fsspec for remote URIs.

        Raises:
            NamespaceError: A manifest's namespace is not in ``allowed_namespaces``.
            RevokedDatasetError: A manifest is revoked and ``allow_revoked`` is not set.
            ValueError: Invalid rank / world size / batch size, mixed modalities, or audio at several rates.
        """
        if global_batch_size <= 0 or world_size <= 0 or not 0 <= rank < world_size:
            raise ValueError(
                f"invalid rank {rank} / world_size {world_size} / global batch {global_batch_size}"
            )
        if global_batch_size % world_size:
            raise ValueError(
                f"global_batch_size {global_batch_size} is not divisible by world_size {world_size}"
            )
        if num_workers > 0 and epochs is None:
            raise ValueError("num_workers > 0 needs a finite number of epochs")
        self._config = dict(
            source=source,
            global_batch_size=global_batch_size,
            rank=rank,
            world_size=world_size,
            seed=seed,
            epochs=epochs,
            num_workers=num_workers,
            skip_corrupt=skip_corrupt,
            allowed_namespaces=tuple(allowed_namespaces),
            allow_revoked=allow_revoked,
            buckets=buckets,
            max_caption_tokens=max_caption_tokens,
            audio_max_frames=audio_max_frames,
            window_samples=window_samples,
            prefetch=prefetch,
            cache_dir=cache_dir,
            cache_budget_bytes=cache_budget_bytes,
            storage_options=storage_options,
        )
        self.global_batch_size, self.rank, self.world_size = global_batch_size, rank, world_size
        self.local_batch_size = global_batch_size // world_size
        self.seed, self.epochs, self.num_workers, self.prefetch = seed, epochs, num_workers, prefetch
        self.skip_corrupt, self.buckets, self.audio_max_frames = skip_corrupt, buckets, audio_max_frames
        self.cache = ShardCache(cache_dir, cache_budget_bytes, storage_options)
        manifests = load_manifests(source, storage_options)
        for m in manifests:
            check_release(
                m.namespace, m.revoked, m.location or m.name, tuple(allowed_namespaces), allow_revoked
            )
        modalities = {m.modality for m in manifests}
        if len(modalities) != 1:
            raise ValueError(
                f"one MediaLoader reads one modality, got {sorted(modalities)}; mix them with ModalityMixture"
            )
        self.modality = modalities.pop()
        self.sources = [MediaSource(m, self.cache) for m in manifests]
        summaries = [s.shape_summary for m in manifests for s in m.shards]
        self.sample_rate = self._single_sample_rate(summaries) if self.modality == "audio-text" else 0
        longest = max((int(s.get("caption_tokens_max", 0)) for s in summaries), default=0)
        self.max_caption_tokens = longest if max_caption_tokens is None else int(max_caption_tokens)
        # GlobalStream reads only shard_rows and fingerprint from its sources.
        counts = [int(s.shard_rows.sum()) for s in self.sources]
        mixture = Mixture(cast("list[Source]", self.sources), counts, window_samples)
        self.stream = GlobalStream(mixture, seed)
        self._bucket_cache: dict[tuple[int, int], np.ndarray] = {}
        if self.modality == "image-text":
            self.planner: BucketPlanner | FixedPlanner = BucketPlanner(
                self.stream, self._bucket_ids, len(buckets), global_batch_size
            )
        else:
            self.planner = FixedPlanner(self.stream, global_batch_size)
        self.epoch = self.batches_emitted = self.samples_consumed = 0
        self._metrics = LoaderMetrics()

    @staticmethod
    def _single_sample_rate(summaries: list[dict[str, Any]]) -> int:
        rates = sorted({int(r) for s in summaries for r in s.get("sample_rates", [])})
        if len(rates) != 1:
            raise ValueError(
                f"audio shards at sample rates {rates}; the loader does not resample: resample to one rate in "
                "the pipeline (or load each rate with its own MediaLoader)"
            )
        return rates[0]

    # -- shapes from the sample indexes ------------------------------------------------------------------
    def _per_sample(self, refs: RowRefs, values: Any) -> np.ndarray:
        """``values(source, shard)`` (one entry per sample of the shard) gathered for every sample of ``refs``."""
        out = np.zeros(len(refs.source), dtype=np.int64)
        valid = refs.source >= 0
        keys = refs.source[valid] * (1 << 32) + refs.shard[valid]
        rows = refs.row[valid]
        gathered = np.zeros(len(keys), dtype=np.int64)
        for key in np.unique(keys).tolist():
            sel = keys == key
            gathered[sel] = values(key >> 32, key & 0xFFFFFFFF)[rows[sel]]
        out[valid] = gathered
        return out

    def _shard_buckets(self, source: int, shard: int) -> np.ndarray:
        found = self._bucket_cache.get((source, shard))
        if found is None:
            records = self.sources[source].index(shard).records
            found = self.buckets.bucket_ids(records["width"], records["height"]).astype(np.uint8)
            if len(self._bucket_cache) >= 4096:
                self._bucket_cache.clear()
            self._bucket_cache[(source, shard)] = found
        return found

    def _bucket_ids(self, refs: RowRefs) -> np.ndarray:
        return self._per_sample(refs, self._shard_buckets)

    def _frames(self, refs: RowRefs) -> np.ndarray:
        return self._per_sample(refs, lambda src, shard: self.sources[src].index(shard).records["frames"])

    # -- state ---------------------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> str:
        """Identifies the plan: the stream (data, window, seed), the modality and the buckets."""
        extra = self.buckets.fingerprint if self.modality == "image-text" else ""
        text = f"media/1|{self.stream.fingerprint}|{self.modality}|{extra}|{self.global_batch_size}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def epoch_samples(self) -> int:
        """Samples in one epoch of the global stream."""
        return self.stream.epoch_rows

    def state_dict(self) -> dict[str, Any]:
        """The position after the last batch handed out (plain JSON-serialisable values)."""
        return {
            "format": STATE_FORMAT,
            "fingerprint": self.fingerprint,
            "seed": self.seed,
            "global_batch_size": self.global_batch_size,
            "epoch": self.epoch,
            "batches_emitted": self.batches_emitted,
            "samples_consumed": self.samples_consumed,
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue from a position saved by :meth:`state_dict`, under any world size or worker count.

        Args:
            state: A dict returned by :meth:`state_dict`.
            strict: Refuse a state saved for another plan (other data, seed or buckets).

        Raises:
            ValueError: Not a media loader state, another global batch size, a position outside this loader's
                epochs, or (``strict``) another fingerprint or seed. A position that is not a batch boundary of
                this plan raises :class:`~fm_loader.media.plan.PlanMismatchError` on the next iteration.
        """
        validate_state(state, self.epochs, self.epoch_samples, self.global_batch_size)
        if strict and (state["fingerprint"] != self.fingerprint or state["seed"] != self.seed):
            raise ValueError(
                f"state belongs to another plan (fingerprint {state['fingerprint']} seed {state['seed']}, this loader "
                f"has {self.fingerprint} seed {self.seed}); pass strict=False to continue anyway"
            )
        self.epoch, self.batches_emitted = state["epoch"], state["batches_emitted"]
        self.samples_consumed = state["samples_consumed"]

    # -- planning ------------------------------------------------------------------------------------------
    def _plan(self) -> Iterator[PlannedBatch]:
        epoch, skip, consumed = self.epoch, self.batches_emitted, self.samples_consumed
        while self.epochs is None or epoch < self.epochs:
            yield from self.planner.epoch_batches(epoch, skip, consumed)
            epoch, skip, consumed = epoch + 1, 0, 0

    def planned_batches(self) -> Iterator[PlannedBatch]:
        """The remaining global batches as planned (bucket and samples of each), without reading any media.

        Cheap (sample indexes only): a trainer can look ahead at the bucket sequence, e.g. to compile one step
        per bucket shape. Does not move the loader's position.
        """
        return self._plan()

    def _spec(self, planned: PlannedBatch) -> BatchSpec:
        size = self.local_batch_size
        refs = planned.refs[self.rank * size : (self.rank + 1) * size]
        if self.modality == "image-text":
            return BatchSpec(planned, refs, self.buckets.shapes[planned.bucket])
        if self.audio_max_frames is not None:
            return BatchSpec(planned, refs, (int(self.audio_max_frames),))
        whole = RowRefs(
            planned.refs[:, SOURCE], planned.refs[:, SHARD], planned.refs[:, ROW], planned.refs[:, SAMPLE_ID]
        )
        return BatchSpec(planned, refs, (max(1, int(self._frames(whole).max(initial=0))),))

    def _specs(self) -> Iterator[BatchSpec]:
        return map(self._spec, self._plan())

    # -- building ------------------------------------------------------------------------------------------
    def _build(self, spec: BatchSpec) -> dict[str, Any]:
        """This rank's batch: numpy buffers filled sample by sample, handed to torch without a copy."""
        n = len(spec.refs)
        out: dict[str, Any] = {
            "caption_ids": np.zeros((n, self.max_caption_tokens), dtype=np.int32),
            "caption_lengths": np.zeros(n, dtype=np.int64),
            "valid": np.zeros(n, dtype=bool),
            "text": [""] * n,
        }
        if self.modality == "image-text":
            out["images"] = np.zeros((n, 3, *spec.shape), dtype=np.uint8)
        else:
            out["audio"] = np.zeros((n, spec.shape[0]), dtype=np.float32)
            out["audio_lengths"] = np.zeros(n, dtype=np.int64)
        for slot, (source, shard, row) in enumerate(spec.refs[:, [SOURCE, SHARD, ROW]].tolist()):
            if source >= 0:
                out["valid"][slot] = self._fill(out, slot, source, shard, row, spec.shape)
        caption_lengths = out.pop("caption_lengths")
        batch: dict[str, Any] = {
            "caption_ids": torch.from_numpy(out["caption_ids"]),
            "caption_mask": torch.from_numpy(np.arange(self.max_caption_tokens) < caption_lengths[:, None]),
            "valid": torch.from_numpy(out["valid"]),
            "sample_ids": torch.from_numpy(spec.refs[:, SAMPLE_ID].copy()),
            "text": out["text"],
        }
        if self.modality == "image-text":
            batch["images"] = torch.from_numpy(out["images"])
            batch["bucket"] = torch.tensor(spec.planned.bucket, dtype=torch.int64)
        else:
            lengths = out["audio_lengths"]
            batch["audio"] = torch.from_numpy(out["audio"])
            batch["audio_mask"] = torch.from_numpy(np.arange(spec.shape[0]) < lengths[:, None])
            batch["audio_lengths"] = torch.from_numpy(lengths)
        return batch

    def _fill(
        self, out: dict[str, Any], slot: int, source: int, shard: int, row: int, shape: tuple[int, ...]
    ) -> bool:
        """Decode one sample into ``slot`` of the buffers; False when it is skipped as corrupt."""
        src = self.sources[source]
        try:
            reader = src.reader(shard)
        except CorruptShardError:
            if not self.skip_corrupt:
                raise
            logger.warning("skipping sample %d of missing shard %s", row, src.shard_label(shard))
            return False
        sample = reader.sample(row, self.skip_corrupt)
        if sample is None:
            return False
        try:
            if self.modality == "image-text":
                out["images"][slot] = decode_image(sample.media, shape[0], shape[1]).transpose(2, 0, 1)
            else:
                wave, rate = decode_audio(sample.media)
                if rate != self.sample_rate:
                    raise ValueError(f"sample rate {rate}, the dataset's is {self.sample_rate}")
                length = min(len(wave), shape[0])
                out["audio"][slot, :length] = wave[:length]
                out["audio_lengths"][slot] = length
        except ValueError as exc:
            key = reader.index.key(row)
            if not self.skip_corrupt:
                raise CorruptSampleError(reader.label, row, key, f"{exc}; re-shard this sample") from exc
            logger.warning("skipping sample %d (%s) of %s: %s", row, key, reader.label, exc)
            return False
        if self.max_caption_tokens and int(reader.index.records[row]["caption_tokens"]):
            tokens = json.loads(bytes(sample.meta))["caption_tokens"][: self.max_caption_tokens]
            out["caption_ids"][slot, : len(tokens)] = tokens
            out["caption_lengths"][slot] = len(tokens)
        out["text"][slot] = sample.text
        return True

    # -- iteration -----------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Yield this rank's batches from the current position to the end of the last epoch.

        The state advances as each batch is handed out, so :meth:`state_dict` taken between batches resumes right
        after the last one received.
        """
        return self._iter_workers() if self.num_workers > 0 else self._iter_inline()

    def _iter_inline(self) -> Iterator[dict[str, Any]]:
        built = ((spec, self._build(spec)) for spec in self._specs())
        batches: Generator[tuple[BatchSpec, dict[str, Any]], None, None]
        batches = prefetched(built, self.prefetch) if self.prefetch > 0 else built
        try:
            while True:
                t0 = time.perf_counter()
                try:
                    spec, batch = next(batches)
                except StopIteration:
                    return
                self._metrics.wait_s += time.perf_counter() - t0
                self._advance(spec.planned, batch)
                yield batch
        finally:
            batches.close()  # stops the prefetch thread when the trainer stops early

    def _iter_workers(self) -> Iterator[dict[str, Any]]:
        schedule = list(self._specs())
        if not schedule:
            return
        data = torch.utils.data.DataLoader(
            _WorkerBatches(self._config, schedule),
            batch_size=None,
            num_workers=self.num_workers,
            prefetch_factor=max(1, self.prefetch),
        )
        it = iter(data)
        for spec in schedule:
            t0 = time.perf_counter()
            batch = next(it)
            self._metrics.wait_s += time.perf_counter() - t0
            self._advance(spec.planned, batch)
            yield batch

    def _advance(self, planned: PlannedBatch, batch: dict[str, Any]) -> None:
        self.epoch, self.batches_emitted, self.samples_consumed = (
            planned.epoch,
            planned.index + 1,
            planned.consumed,
        )
        valid = batch["valid"].numpy()
        real = batch["sample_ids"].numpy() >= 0
        m = self._metrics
        m.batches += 1
        m.rows += int(valid.sum())
        m.tokens += int(batch["caption_mask"].sum())
        m.corrupt_rows_skipped += int((real & ~valid).sum())

    # -- reporting -----------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Counters since construction or :meth:`reset_metrics`: ``samples``, ``samples_per_s``, ``batches``,
        ``corrupt_samples_skipped``, ``caption_tokens``, ``input_stall_s`` and the cache's counters."""
        snap = self._metrics.snapshot(self.cache.stats)
        snap.update(
            samples=snap["rows"],
            samples_per_s=snap["rows_per_s"],
            caption_tokens=snap["tokens"],
            corrupt_samples_skipped=snap["corrupt_rows_skipped"],
        )
        return snap

    def reset_metrics(self) -> None:
        self._metrics = LoaderMetrics()

    def close(self) -> None:
        """Close the open shards."""
        for src in self.sources:
            src.close()

    def __enter__(self) -> MediaLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _WorkerBatches(torch.utils.data.IterableDataset):
    """Runs inside DataLoader workers: worker ``w`` builds every ``num_workers``-th batch of the schedule."""

    def __init__(self, config: dict[str, Any], schedule: list[BatchSpec]) -> None:
        self.config, self.schedule = config, schedule

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        local = MediaLoader(**{**self.config, "num_workers": 0})
        try:
            for spec in self.schedule[wid::nw]:
                yield local._build(spec)
        finally:
            local.close()
