"""media_shard: normalized samples -> multimodal WebDataset shards (``fm_loader.media``) and their manifests.

One unit per upstream part; a shard holds one modality, so each unit writes image, audio and video shards
of at most ``rows_per_shard`` samples, in part order (the samples of one shard are in memory at once). A sample is ``<key>.<jpg|flac|strip.jpg>``, ``<key>.txt`` and
``<key>.json`` (licence, provenance down to the raw CAS hash, namespace, the caption's token ids under the
pinned tokenizer, and the measured shape; a video clip's ``keyframes`` and, in its provenance, the clip's
index and time range in its video, and, when media_clip stored it, the re-encoded clip as a fourth member
``<key>.clip.mp4`` with its sha256 and size in the ``.json``); the writer fixes member order and headers, so shards are
byte-for-byte reproducible, and its sample index carries per-sample checksums and shapes. ``complete``
writes ``manifest-image.json`` / ``manifest-audio.json`` / ``manifest-video.json`` (``MediaManifest``) for the partition. Checks:
every shard matches its manifest sha256, and ``bucket_balance`` reports how the images spread over the
loader's aspect-ratio buckets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from fm_assets.engine import layout
from fm_assets.engine.checks import CheckOutcome, StageCheck, stored_digests
from fm_assets.engine.landing import read_batch_manifest
from fm_assets.engine.records import StageSuccess, UnitMarker
from fm_assets.engine.stage import SideInputs, Stage, StageContext, UnitContext, UnitResult
from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.tokenizer import PinnedTokenizer, pinned_tokenizer
from fm_assets.transforms.readers.media_types import AUDIO, IMAGE, VIDEO
from fm_loader.media.buckets import DEFAULT_BUCKETS
from fm_loader.media.format import MediaSample, encode_media_shard
from fm_loader.media.manifest import MediaManifest, MediaShardEntry

MANIFESTS = {IMAGE: "manifest-image.json", AUDIO: "manifest-audio.json", VIDEO: "manifest-video.json"}
MODALITY_NAME = {IMAGE: "image-text", AUDIO: "audio-text", VIDEO: "video-text"}
SHARD_TAG = {IMAGE: "img", AUDIO: "aud", VIDEO: "vid"}
READ_ROWS = 64  # samples read from a part at a time (each holds its normalized media)
MAX_BUCKET_SHARE = 0.9  # one aspect-ratio bucket holding more than this starves the others' batches

MEDIA_SHARD_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("batch", pa.string(), nullable=False),
        pa.field("modality", pa.string(), nullable=False),
        pa.field("shard", pa.string(), nullable=False),  # tar file name in this output folder
        pa.field("sample_in_shard", pa.int32(), nullable=False),
        pa.field("key", pa.string(), nullable=False),  # the sample's WebDataset key inside the shard
        pa.field("media_sha256", pa.string(), nullable=False),  # raw media (provenance)
        pa.field("norm_sha256", pa.string(), nullable=False),  # the bytes in the shard
        pa.field("width", pa.int32()),
        pa.field("height", pa.int32()),
        pa.field("sample_rate", pa.int32()),
        pa.field("duration_s", pa.float64()),
        pa.field("caption_tokens", pa.int32(), nullable=False),
        pa.field("license", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
    ]
)


def _manifests(store: ObjectStore, success: StageSuccess) -> dict[str, MediaManifest]:
    return {
        modality: MediaManifest.from_json(store.read_bytes(rel))
        for modality, rel in success.artifacts.get("manifests", {}).items()
    }


def check_media_shard_integrity(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    expected: list[tuple[str, str]] = []  # (file, sha256 its manifest records)
    samples = 0
    for manifest in _manifests(store, success).values():
        for entry in manifest.shards:
            samples += entry.samples
            expected += [(entry.path, entry.sha256), (entry.index_path, entry.index_sha256)]
    found = stored_digests(store, [layout.in_output(success.prefix, path) for path, _ in expected])
    bad = [path for (path, digest), actual in zip(expected, found, strict=True) if actual != digest]
    return CheckOutcome(
        not bad and samples == success.counts.records_out,
        {"bad_files": bad, "manifest_samples": samples, "records_out": success.counts.records_out},
        "shards and sample indexes match their manifest sha256; every sample is in a shard",
    )


def check_bucket_balance(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    manifest = _manifests(store, success).get(IMAGE)
    counts = [0] * len(DEFAULT_BUCKETS)
    for entry in manifest.shards if manifest else []:
        for index, count in enumerate(entry.shape_summary.get("bucket_counts", [])):
            counts[index] += count
    images = sum(counts)
    largest = max(counts) / images if images else 0.0
    return CheckOutcome(
        largest <= MAX_BUCKET_SHARE or images == 0,
        {
            "images": images,
            "bucket_counts": counts,
            "buckets_hw": [list(s) for s in DEFAULT_BUCKETS.shapes],
            "largest_bucket_share": round(largest, 4),
            "empty_buckets": sum(1 for c in counts if c == 0),
            "threshold": MAX_BUCKET_SHARE,
        },
        f"no aspect-ratio bucket holds more than {MAX_BUCKET_SHARE:.0%} of the released images",
    )


class MediaShardStage(Stage):
    name = "media_shard"
    code_version = "media-shard-v3"
    upstream = "media_normalize"
    description = (
        "Multimodal WebDataset shards (fm_loader.media: per-sample checksums and shapes) + manifests."
    )
    output_schema = MEDIA_SHARD_SCHEMA
    side_input_assets = ("tokenizer",)
    checks = (
        StageCheck(
            "media_shard_integrity",
            "shards match manifest sha256; samples complete",
            check_media_shard_integrity,
        ),
        StageCheck(
            "bucket_balance",
            f"no aspect-ratio bucket holds more than {MAX_BUCKET_SHARE:.0%} of the images",
            check_bucket_balance,
            blocking=False,
            warn_only=True,
        ),
    )

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        pinned = pinned_tokenizer(ctx.store)
        return SideInputs({"tokenizer": pinned.sha256}, pinned)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        pinned: PinnedTokenizer = ctx.side.data
        return {"samples_per_shard": ctx.settings.rows_per_shard, "caption_tokens": pinned.vocab_size < 65536}

    def process(self, unit: UnitContext) -> UnitResult:
        ctx = unit.partition
        pinned: PinnedTokenizer = ctx.side.data
        tokenize = pinned.vocab_size < 65536  # the shard index stores caption token ids as uint16
        per_shard = ctx.settings.rows_per_shard
        records_in = 0
        pending: dict[str, list[dict[str, Any]]] = {m: [] for m in MODALITY_NAME}
        entries: dict[str, list[dict[str, Any]]] = {m: [] for m in MODALITY_NAME}
        for part in unit.unit.inputs:
            for record in (r for b in unit.iter_batches(part, batch_size=READ_ROWS) for r in b.to_pylist()):
                records_in += 1
                pending[record["modality"]].append(record)
                if len(pending[record["modality"]]) == per_shard:
                    self._write_shard(unit, record["modality"], pending, entries, tokenize)
        for modality in MODALITY_NAME:
            if pending[modality]:
                self._write_shard(unit, modality, pending, entries, tokenize)
        return UnitResult(
            records_in=records_in, extra={"shards": sum(map(len, entries.values())), "entries": entries}
        )

    @staticmethod
    def _write_shard(
        unit: UnitContext,
        modality: str,
        pending: dict[str, list[dict[str, Any]]],
        entries: dict[str, list[dict[str, Any]]],
        tokenize: bool,
    ) -> None:
        """Encode one shard of ``pending[modality]`` (media read from the CAS one sample at a time)."""
        records, pending[modality] = pending[modality], []
        name = f"media-{unit.unit.unit_id}-{SHARD_TAG[modality]}-{len(entries[modality]):04d}"
        pinned: PinnedTokenizer = unit.partition.side.data
        rows = []

        def samples() -> Iterator[MediaSample]:
            for position, record in enumerate(records):
                tokens = pinned.tokenizer.encode(record["text"]).ids if tokenize else []
                key = record["doc_id"].replace(":", "_").replace("@", "-")
                rows.append(
                    {
                        **{
                            f: record[f]
                            for f in ("doc_id", "batch", "modality", "media_sha256", "norm_sha256")
                        },
                        **{f: record[f] for f in ("width", "height", "sample_rate", "duration_s")},
                        **{f: record[f] for f in ("license", "namespace", "text")},
                        "shard": f"{name}.tar",
                        "sample_in_shard": position,
                        "key": key,
                        "caption_tokens": len(tokens),
                    }
                )
                meta: dict[str, Any] = {
                    "licence": record["license"],
                    "namespace": record["namespace"],
                    "provenance": {
                        "sample_id": record["doc_id"],
                        "batch": record["batch"],
                        "source": record["source"],
                        "cas_hash": record["cas_hash"],
                        "record_index": record["record_index"],
                        "origin": record["origin"],
                        "media_sha256": record["media_sha256"],
                        "normalized_sha256": record["norm_sha256"],
                    },
                }
                if record["modality"] == VIDEO:
                    meta["keyframes"] = record["keyframes"]
                    meta["provenance"]["clip"] = {
                        "index": record["clip_index"],
                        "start_s": record["clip_start_s"],
                        "end_s": record["clip_end_s"],
                        "video_duration_s": record["duration_s"],
                        "video_format": record["media_format"],
                    }
                    if record.get("clip_data"):  # the clip itself, re-encoded (ClipPolicy.store_clip)
                        meta["clip"] = {"sha256": record["clip_sha256"], "bytes": record["clip_bytes"]}
                if tokenize:
                    meta["caption_tokens"] = tokens
                    meta["tokenizer_sha256"] = pinned.sha256
                yield MediaSample(
                    key,
                    record["norm_data"],
                    record["norm_ext"],
                    record["text"],
                    meta,
                    clip=record.get("clip_data") or None,
                )

        encoded = encode_media_shard(samples(), name)
        for file_name, data in sorted(encoded.files.items()):
            unit.writer.add_file(file_name, data)
        unit.writer.write_table(pa.Table.from_pylist(rows, schema=MEDIA_SHARD_SCHEMA))
        entries[modality].append(json.loads(json.dumps(MediaShardEntry.from_info(encoded.info).__dict__)))

    def complete(
        self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        pinned: PinnedTokenizer = ctx.side.data
        manifests: dict[str, str] = {}
        samples: dict[str, int] = {}
        namespace = read_batch_manifest(ctx.store, ctx.batch).namespace
        for modality in MODALITY_NAME:
            shards = [
                MediaShardEntry(**entry) for m in markers for entry in m.extra["entries"].get(modality, [])
            ]
            if not shards:
                continue
            manifest = MediaManifest(
                name=f"{ctx.settings.dataset_name}-{MODALITY_NAME[modality]}/{ctx.batch}",
                version=layout.key_of(output_prefix),
                modality=MODALITY_NAME[modality],
                code_version=ctx.pipeline_version,
                shards=shards,
                namespace=namespace,
                tokenizer_hash=pinned.sha256 if pinned.vocab_size < 65536 else "",
                extra={"batch": ctx.batch},
            )
            rel = layout.in_output(output_prefix, MANIFESTS[modality])
            ctx.store.write_bytes(rel, manifest.to_json().encode())
            manifests[modality] = rel
            samples[modality] = manifest.samples
        return {"manifests": manifests, "samples": samples, "tokenizer_sha256": pinned.sha256}


STAGE = MediaShardStage()
