"""Video-text batches: a clip's keyframe strip decoded to ``(F, 3, H, W)``, bucketed by (aspect ratio, keyframe
count), plus each sample's re-encoded clip (``clips``, MP4 bytes) when the release carries clips. Strips are
decoded where images are (``image_decode``): on the GPU through the image path's decoder when batches go to a
CUDA device that has it (:meth:`fm_loader.media.gpu_decode.GpuImageDecoder.decode_strips`), on the CPU
otherwise. Everything else (stream, plan, state, resume, corrupt-sample handling) is the image-text builder's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fm_loader.builders.media import BatchSpec, ImageText
from fm_loader.media.decode import decode_strip
from fm_loader.media.gpu_decode import GpuImageDecoder, payloads
from fm_loader.media.manifest import MediaManifest
from fm_loader.media.plan import BucketPlanner, PlannedBatch
from fm_loader.media.sources import SampleBytes

if TYPE_CHECKING:
    from fm_loader.loader import Loader


class VideoText(ImageText):
    """Video-text batches: keyframe strips bucketed by (aspect ratio, keyframe count), one bucket a batch.

    The buckets are the image buckets times the keyframe counts found in the manifests' shape summaries
    (``frame_counts``); a batch's frames are ``(B, F, 3, H, W)``. The plan, state and resume are the image
    planner's, so the same global batches come out under any world size.
    """

    modality = "video-text"

    def __init__(self, loader: Loader, manifests: list[MediaManifest]) -> None:
        counts = sorted(
            {int(f) for m in manifests for s in m.shards for f in s.shape_summary.get("keyframes", [])}
        )
        self.frame_counts = counts or [1]
        # a release whose shards carry re-encoded clips: batches add ``clips`` (None for a sample without one)
        self.with_clips = any(s.shape_summary.get("clips") for m in manifests for s in m.shards)
        super().__init__(loader, manifests)
        self.planner = BucketPlanner(
            self.stream,
            self._bucket_ids,
            len(self.buckets) * len(self.frame_counts),
            loader.global_batch_size,
        )

    @property
    def layout(self) -> str:
        return f"{self.buckets.fingerprint}|frames={self.frame_counts}"

    def _shard_buckets(self, source: int, shard: int) -> np.ndarray:
        found = self._bucket_cache.get((source, shard))
        if found is None:
            records = self.sources[source].index(shard).records
            aspect = self.buckets.bucket_ids(records["width"], records["height"]).astype(np.int64)
            frames = np.searchsorted(np.array(self.frame_counts), records["frames"].astype(np.int64))
            found = aspect * len(self.frame_counts) + frames
            if len(self._bucket_cache) >= 4096:
                self._bucket_cache.clear()
            self._bucket_cache[(source, shard)] = found
        return found

    def _spec(self, planned: PlannedBatch) -> BatchSpec:
        aspect, frames = divmod(planned.bucket, len(self.frame_counts))
        return BatchSpec(
            planned, self._rank_refs(planned), (self.frame_counts[frames], *self.buckets.shapes[aspect])
        )

    def _buffers(self, n: int, shape: tuple[int, ...]) -> dict[str, Any]:
        out: dict[str, Any] = (
            {"chunks": [b""] * n, "where": [None] * n}  # compressed strips, decoded in the trainer's process
            if self._decode_mode != "cpu"
            else {"frames": np.zeros((n, shape[0], 3, *shape[1:]), dtype=np.uint8)}
        )
        if self.with_clips:
            out["clips"] = [None] * n
        return out

    def _decode_sample(
        self, out: dict[str, Any], slot: int, sample: SampleBytes, shape: tuple[int, ...]
    ) -> None:
        self._decode(out, slot, sample.media, shape)
        if self.with_clips:
            clip = sample.clip()
            out["clips"][slot] = bytes(clip) if clip is not None else None

    def _decode(self, out: dict[str, Any], slot: int, media: memoryview, shape: tuple[int, ...]) -> None:
        if "chunks" in out:
            out["chunks"][slot] = bytes(media)
            return
        out["frames"][slot] = decode_strip(media, shape[0], shape[1], shape[2]).transpose(0, 3, 1, 2)

    def _finish(self, batch: dict[str, Any], out: dict[str, Any], spec: BatchSpec) -> None:
        count = spec.shape[0]
        if "chunks" in out:
            self._pack_chunks(batch, out)
        else:
            batch["frames"] = torch.from_numpy(out["frames"])
        batch["frame_mask"] = torch.from_numpy(np.repeat(out["valid"][:, None], count, axis=1))
        if self.with_clips:
            batch["clips"] = [
                c if v else None for c, v in zip(out["clips"], out["valid"].tolist(), strict=True)
            ]
        batch["bucket"] = torch.tensor(spec.planned.bucket, dtype=torch.int64)

    def _gpu_decode(
        self, decoder: GpuImageDecoder, batch: dict[str, Any]
    ) -> tuple[str, torch.Tensor, dict[int, str]]:
        aspect, which = divmod(int(batch["bucket"]), len(self.frame_counts))
        frames, failed = decoder.decode_strips(
            payloads(batch), self.frame_counts[which], self.buckets.shapes[aspect]
        )
        return "frames", frames, failed
