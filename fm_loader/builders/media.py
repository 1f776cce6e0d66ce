"""Image-text, audio-text and video-text batches: samples decoded from media shards into one fixed shape per batch.

The global stream of samples is the packed-token one (:class:`fm_loader.stream.GlobalStream`); which samples
form global batch ``k`` is decided by :mod:`fm_loader.media.plan` (one aspect-ratio bucket per image batch;
consecutive samples per audio batch). Rank ``r`` of ``W`` takes the contiguous slice ``[r*G/W, (r+1)*G/W)``
of every global batch, so the ranks' slices concatenate to the same global batches under any world size.

Batch keys (``B = G / W`` samples of this rank; ``L`` = ``max_caption_tokens``):

=============== ================ ==========================================================================
images          (B, 3, H, W) u8  image-text only: RGB, cropped to the bucket's aspect ratio and resized
bucket          () int64         image-text: the bucket index (``H, W = loader.buckets.shapes[bucket]``);
                                 video-text: ``aspect * len(frame_counts) + frame-count index``
frames          (B,F,3,H,W) u8   video-text only: the clip's F keyframes fitted to the bucket's shape
frame_mask      (B, F) bool      video-text only: ``True`` on real keyframes (``False`` for padding)
clips           list[bytes|None] video-text only, when the release carries clips: each sample's re-encoded clip (MP4)
audio           (B, S) float32   audio-text only: mono waveform, zero after its length
audio_mask      (B, S) bool      audio-text only: ``True`` on real frames
audio_lengths   (B,) int64       audio-text only: real frames per sample
caption_ids     (B, L) int32     the sample's ``caption_tokens`` (0 after their end); ``L`` may be 0
caption_mask    (B, L) bool      ``True`` on real caption tokens
valid           (B,) bool        ``False`` for padding (end of epoch) and skipped corrupt samples
sample_ids      (B,) int64       ``source << 48 | sample index in the source``; -1 for padding
text            list[str]        captions / transcripts ("" where not valid)
=============== ================ ==========================================================================

``S`` is the longest clip of the *global* batch (every rank has the same shape), or ``audio_max_frames`` when
given (longer clips are cut; a fixed ``S`` keeps compiled steps from recompiling).

State: ``{format, fingerprint, seed, global_batch_size, epoch, batches_emitted, samples_consumed}``. The global
batch size is part of the plan, so it cannot change on resume (any world size or worker count can).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from fm_loader.builders.base import BatchBuilder, Built, Step
from fm_loader.media.decode import decode_audio, decode_image
from fm_loader.media.errors import CorruptSampleError
from fm_loader.media.gpu_decode import GpuImageDecoder, payloads, select_image_decode
from fm_loader.media.manifest import MediaManifest
from fm_loader.media.plan import ROW, SAMPLE_ID, SHARD, SOURCE, BucketPlanner, FixedPlanner, PlannedBatch
from fm_loader.media.sources import MediaShardReader, MediaSource, SampleBytes
from fm_loader.mixture import Mixture
from fm_loader.sources import CorruptShardError, Source
from fm_loader.state import StateSpec
from fm_loader.stream import GlobalStream, RowRefs

if TYPE_CHECKING:
    from fm_loader.loader import Loader

logger = logging.getLogger(__name__)
STATE = StateSpec(
    "fm_loader.media-state/1",
    position=("batches_emitted", "samples_consumed"),
    progress="samples_consumed",
    label="media loader state",
    pinned=("global_batch_size",),
)


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


class MediaSamples(BatchBuilder):
    """What image-text and audio-text share: sources, the plan, captions and the corrupt-sample rule.

    Attributes:
        modality: The kind (``image-text``, ``audio-text``).
        sources: One :class:`~fm_loader.media.sources.MediaSource` per manifest.
        max_caption_tokens: Width ``L`` of ``caption_ids``.
        stream: The global stream of samples.
        planner: Which samples form each global batch.
    """

    state = STATE
    modality = ""

    def __init__(self, loader: Loader, manifests: list[MediaManifest]) -> None:
        super().__init__(loader)
        opts = loader.options.media
        if loader.num_workers > 0 and loader.epochs is None:
            raise ValueError("num_workers > 0 needs a finite number of epochs")
        self.skip_corrupt = loader.options.read.skip_corrupt
        self.sources = [MediaSource(m, self.cache) for m in manifests]
        self.summaries = [s.shape_summary for m in manifests for s in m.shards]
        longest = max((int(s.get("caption_tokens_max", 0)) for s in self.summaries), default=0)
        self.max_caption_tokens = longest if opts.max_caption_tokens is None else int(opts.max_caption_tokens)
        counts = [int(s.shard_rows.sum()) for s in self.sources]  # GlobalStream reads shard_rows, fingerprint
        self.stream = GlobalStream(
            Mixture(cast("list[Source]", self.sources), counts, opts.window_samples), loader.seed
        )
        self.planner: BucketPlanner | FixedPlanner = FixedPlanner(self.stream, loader.global_batch_size)

    # -- the plan ------------------------------------------------------------------------------------------
    @property
    def layout(self) -> str:
        """What else the plan depends on (the image buckets)."""
        return ""

    @property
    def fingerprint(self) -> str:
        """Identifies the plan: the stream (data, window, seed), the modality and the buckets."""
        text = (
            f"media/1|{self.stream.fingerprint}|{self.modality}|{self.layout}|{self.loader.global_batch_size}"
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def epoch_rows(self) -> int:
        return self.stream.epoch_rows

    def pins(self) -> dict[str, int]:
        return {"global_batch_size": self.loader.global_batch_size}

    def _plan(self, epoch: int, position: tuple[int, ...], epochs: int | None) -> Iterator[PlannedBatch]:
        skip, consumed = position
        while epochs is None or epoch < epochs:
            yield from self.planner.epoch_batches(epoch, skip, consumed)
            epoch, skip, consumed = epoch + 1, 0, 0

    def planned_batches(self) -> Iterator[PlannedBatch]:
        """The remaining global batches as planned (bucket and samples of each), without reading any media.

        Cheap (sample indexes only): a trainer can look ahead at the bucket sequence, e.g. to compile one step
        per bucket shape. Does not move the loader's position.
        """
        loader = self.loader
        return self._plan(loader.epoch, tuple(loader._position.values()), loader.epochs)

    def steps(self, epoch: int, position: tuple[int, ...], epochs: int | None) -> Iterator[Step]:
        for planned in self._plan(epoch, position, epochs):
            after = (planned.epoch, (planned.index + 1, planned.consumed))
            yield Step(planned.epoch, self._spec(planned), after)

    def _rank_refs(self, planned: PlannedBatch) -> np.ndarray:
        size = self.loader.local_batch_size
        return planned.refs[self.loader.rank * size : (self.loader.rank + 1) * size]

    def _spec(self, planned: PlannedBatch) -> BatchSpec:
        raise NotImplementedError

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

    # -- building ------------------------------------------------------------------------------------------
    def _buffers(self, n: int, shape: tuple[int, ...]) -> dict[str, Any]:
        """The kind's own media buffers for ``n`` samples."""
        raise NotImplementedError

    def _decode(self, out: dict[str, Any], slot: int, media: memoryview, shape: tuple[int, ...]) -> None:
        """Decode one sample's media into ``slot`` (``ValueError`` when it does not decode)."""
        raise NotImplementedError

    def _finish(self, batch: dict[str, Any], out: dict[str, Any], spec: BatchSpec) -> None:
        """Add the kind's own tensors to ``batch``."""
        raise NotImplementedError

    def _decode_sample(
        self, out: dict[str, Any], slot: int, sample: SampleBytes, shape: tuple[int, ...]
    ) -> None:
        """Decode one verified sample into ``slot``: its media (a kind with more members adds them)."""
        self._decode(out, slot, sample.media, shape)

    def build(self, work: BatchSpec) -> Built:
        """This rank's batch: numpy buffers filled sample by sample, handed to torch without a copy."""
        n, width = len(work.refs), self.max_caption_tokens
        out: dict[str, Any] = {
            "caption_ids": np.zeros((n, width), dtype=np.int32),
            "caption_lengths": np.zeros(n, dtype=np.int64),
            "valid": np.zeros(n, dtype=bool),
            "text": [""] * n,
            **self._buffers(n, work.shape),
        }
        for slot, (source, shard, row) in enumerate(work.refs[:, [SOURCE, SHARD, ROW]].tolist()):
            if source >= 0:
                out["valid"][slot] = self._fill(out, slot, source, shard, row, work.shape)
        lengths = out["caption_lengths"]
        batch: dict[str, Any] = {
            "caption_ids": torch.from_numpy(out["caption_ids"]),
            "caption_mask": torch.from_numpy(np.arange(width) < lengths[:, None]),
            "valid": torch.from_numpy(out["valid"]),
            "sample_ids": torch.from_numpy(work.refs[:, SAMPLE_ID].copy()),
            "text": out["text"],
        }
        self._finish(batch, out, work)
        valid, real = out["valid"], work.refs[:, SAMPLE_ID] >= 0
        return Built(batch, int(valid.sum()), int(lengths.sum()), corrupt=int((real & ~valid).sum()))

    def _fill(
        self, out: dict[str, Any], slot: int, source: int, shard: int, row: int, shape: tuple[int, ...]
    ) -> bool:
        """Decode one sample into ``slot`` of the buffers; False when it is skipped as corrupt."""
        src = self.sources[source]
        try:
            reader: MediaShardReader = src.reader(shard)
        except CorruptShardError:
            if not self.skip_corrupt:
                raise
            logger.warning("skipping sample %d of missing shard %s", row, src.shard_label(shard))
            return False
        sample = reader.sample(row, self.skip_corrupt)
        if sample is None:
            return False
        try:
            self._decode_sample(out, slot, sample, shape)
            if "where" in out:  # decoded later (on the GPU): errors there must name the sample
                out["where"][slot] = (reader.label, row, reader.index.key(row))
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

    def named_metrics(self, snapshot: dict[str, float]) -> dict[str, float]:
        snapshot.update(
            samples=snapshot["rows"],
            samples_per_s=snapshot["rows_per_s"],
            caption_tokens=snapshot["tokens"],
            corrupt_samples_skipped=snapshot["corrupt_rows_skipped"],
        )
        return snapshot

    def close(self) -> None:
        for src in self.sources:
            src.close()


class ImageText(MediaSamples):
    """Image-text batches: one aspect-ratio bucket per global batch, images cropped and resized to it."""

    modality = "image-text"

    def __init__(self, loader: Loader, manifests: list[MediaManifest]) -> None:
        super().__init__(loader, manifests)
        self.buckets = loader.options.media.buckets
        self.sample_rate = 0
        self._bucket_cache: dict[tuple[int, int], np.ndarray] = {}
        self.planner = BucketPlanner(
            self.stream, self._bucket_ids, len(self.buckets), loader.global_batch_size
        )
        delivery = loader.options.delivery
        self._decode_mode = select_image_decode(delivery.image_decode, loader.device, delivery.jpeg_codec)
        self._gpu_decoder: GpuImageDecoder | None = None

    @property
    def image_decode_mode(self) -> str:
        return self._decode_mode

    @property
    def layout(self) -> str:
        return self.buckets.fingerprint

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

    def _spec(self, planned: PlannedBatch) -> BatchSpec:
        return BatchSpec(planned, self._rank_refs(planned), self.buckets.shapes[planned.bucket])

    def _buffers(self, n: int, shape: tuple[int, ...]) -> dict[str, Any]:
        if self._decode_mode != "cpu":  # compressed bytes, decoded in the trainer's process
            return {"chunks": [b""] * n, "where": [None] * n}
        return {"images": np.zeros((n, 3, *shape), dtype=np.uint8)}

    def _decode(self, out: dict[str, Any], slot: int, media: memoryview, shape: tuple[int, ...]) -> None:
        if "chunks" in out:
            out["chunks"][slot] = bytes(media)
            return
        out["images"][slot] = decode_image(media, shape[0], shape[1]).transpose(2, 0, 1)

    @staticmethod
    def _pack_chunks(batch: dict[str, Any], out: dict[str, Any]) -> None:
        """The compressed bytes of a batch that is not decoded here (``image_decode`` "gpu" or "bytes")."""
        sizes = [len(c) for c in out["chunks"]]
        batch["image_bytes"] = torch.from_numpy(np.frombuffer(b"".join(out["chunks"]), dtype=np.uint8).copy())
        batch["image_offsets"] = torch.from_numpy(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
        batch["image_where"] = out["where"]

    def _finish(self, batch: dict[str, Any], out: dict[str, Any], spec: BatchSpec) -> None:
        if "chunks" in out:
            self._pack_chunks(batch, out)
        else:
            batch["images"] = torch.from_numpy(out["images"])
        batch["bucket"] = torch.tensor(spec.planned.bucket, dtype=torch.int64)

    def _gpu_decode(
        self, decoder: GpuImageDecoder, batch: dict[str, Any]
    ) -> tuple[str, torch.Tensor, dict[int, str]]:
        """(batch key, decoded tensor, failures) of a batch's compressed bytes on the device."""
        images, failed = decoder.decode(payloads(batch), self.buckets.shapes[int(batch["bucket"])])
        return "images", images, failed

    def device_stage(self, batch: dict[str, Any], item: Any) -> dict[str, Any]:
        """GPU decode (``image_decode`` resolved to ``"gpu"``): the compressed bytes become ``images`` (video:
        ``frames``) on the device; a sample that decodes neither there nor on the CPU is a
        ``CorruptSampleError``, or with ``skip_corrupt`` padding counted in the metrics, as on the CPU path."""
        if self._decode_mode != "gpu":
            return batch
        if self._gpu_decoder is None:
            assert self.loader.device is not None
            delivery = self.loader.options.delivery
            self._gpu_decoder = GpuImageDecoder(self.loader.device, preference=delivery.jpeg_codec)
        decoded_key, decoded, failed = self._gpu_decode(self._gpu_decoder, batch)
        built: Built = item[1]
        for slot, reason in sorted(failed.items()):
            label, row, key = batch["image_where"][slot]
            if not self.skip_corrupt:
                raise CorruptSampleError(label, row, key, f"{reason}; re-shard this sample")
            logger.warning("skipping sample %d (%s) of %s: %s", row, key, label, reason)
            built.rows -= 1
            built.corrupt += 1
            built.tokens -= int(batch["caption_mask"][slot].sum())
            batch["valid"][slot] = False
            batch["caption_ids"][slot] = 0
            batch["caption_mask"][slot] = False
            batch["text"][slot] = ""
            if "frame_mask" in batch:
                batch["frame_mask"][slot] = False
            if "clips" in batch:
                batch["clips"][slot] = None
        out: dict[str, Any] = {}
        for name, value in batch.items():  # the CPU path's keys in its order: the decoded tensor in place
            if name == "image_bytes":
                out[decoded_key] = decoded
            elif name not in ("image_offsets", "image_where"):
                out[name] = value
        return out


class AudioText(MediaSamples):
    """Audio-text batches: consecutive samples, clips padded to the longest of the global batch, with a mask."""

    modality = "audio-text"

    def __init__(self, loader: Loader, manifests: list[MediaManifest]) -> None:
        super().__init__(loader, manifests)
        self.audio_max_frames = loader.options.media.audio_max_frames
        rates = sorted({int(r) for s in self.summaries for r in s.get("sample_rates", [])})
        if len(rates) != 1:
            raise ValueError(
                f"audio shards at sample rates {rates}; the loader does not resample: resample to one rate in "
                "the pipeline (or load each rate with its own Loader)"
            )
        self.sample_rate = rates[0]

    def _frames(self, refs: RowRefs) -> np.ndarray:
        return self._per_sample(refs, lambda src, shard: self.sources[src].index(shard).records["frames"])

    def _spec(self, planned: PlannedBatch) -> BatchSpec:
        if self.audio_max_frames is not None:
            return BatchSpec(planned, self._rank_refs(planned), (int(self.audio_max_frames),))
        refs = planned.refs
        whole = RowRefs(refs[:, SOURCE], refs[:, SHARD], refs[:, ROW], refs[:, SAMPLE_ID])
        return BatchSpec(
            planned, self._rank_refs(planned), (max(1, int(self._frames(whole).max(initial=0))),)
        )

    def _buffers(self, n: int, shape: tuple[int, ...]) -> dict[str, Any]:
        return {
            "audio": np.zeros((n, shape[0]), dtype=np.float32),
            "audio_lengths": np.zeros(n, dtype=np.int64),
        }

    def _decode(self, out: dict[str, Any], slot: int, media: memoryview, shape: tuple[int, ...]) -> None:
        wave, rate = decode_audio(media)
        if rate != self.sample_rate:
            raise ValueError(f"sample rate {rate}, the dataset's is {self.sample_rate}")
        length = min(len(wave), shape[0])
        out["audio"][slot, :length] = wave[:length]
        out["audio_lengths"][slot] = length

    def _finish(self, batch: dict[str, Any], out: dict[str, Any], spec: BatchSpec) -> None:
        lengths = out["audio_lengths"]
        batch["audio"] = torch.from_numpy(out["audio"])
        batch["audio_mask"] = torch.from_numpy(np.arange(spec.shape[0]) < lengths[:, None])
        batch["audio_lengths"] = torch.from_numpy(lengths)
