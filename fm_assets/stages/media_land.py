"""media_land: group the batch's media into image-, audio- and video-text samples; media bytes into the CAS.

Reads what ``transforms.readers.media_samples`` claims as media (files grouped by key, tars, WebDataset tars,
``*.media.jsonl``). Groups are cut into units of about ``land_unit_bytes`` (a group never spans units). Each
sample's raw media bytes go to ``cas/<h[:2]>/<h>`` (write-once, shared with text landing) and its record
carries the CAS hash, the landed container (file, tar or JSONL) and index, batch, source, licence and
namespace. A sample without its media or its text, an unreadable caption or a broken tar is a reject with
its reason; decoding the media is ``media_validate``'s job.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from fm_assets.compliance.namespaces import require_processable
from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_file
from fm_assets.engine.landing import BatchManifest, read_batch_manifest
from fm_assets.engine.stage import SideInputs, Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.stages.land import put_in_cas
from fm_assets.transforms.readers.media_samples import (
    MediaGroup,
    MediaItem,
    MediaProblem,
    group_media,
    is_media_jsonl,
    iter_jsonl_samples,
    iter_tar_samples,
    jsonl_references,
    read_file_group,
)
from fm_assets.transforms.readers.media_types import MEDIA_SCHEMA, modality_of


def sample_id(container_sha: str, origin: str, index: int) -> str:
    """The sample's id: unique in the batch even when two paths hold the same bytes (exact duplicates are
    media_dedup's to find), stable for the same landed path and bytes."""
    return f"{hashlib.sha256(f'{container_sha}:{origin}'.encode()).hexdigest()[:16]}:{index}"


def batch_media_groups(ctx: StageContext) -> list[MediaGroup]:
    """Every media group of the batch (a pure function of the landed files)."""
    manifest: BatchManifest = ctx.side.data
    paths = [entry["path"] for entry in manifest.files]
    refs: dict[str, list[str]] = {}
    for path in paths:
        if is_media_jsonl(path):
            with ctx.store.local_copy(layout.landed_file(ctx.batch, path)) as local:
                refs[path] = jsonl_references(path, local)
    return group_media(paths, refs)


class MediaLandStage(Stage):
    name = "media_land"
    # v5: bounded tar decoding, gzip tars keep their last sample, member checks; v6: clip_* columns
    code_version = "media-land-v6"
    upstream = None
    description = "Media files, tars and media JSONL -> image/audio/video samples with their text; media bytes into the CAS."
    output_schema = MEDIA_SCHEMA

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"unit_bytes": ctx.settings.land_unit_bytes, "rows_per_part": ctx.settings.land_rows_per_part}

    def rows_per_file(self, ctx: StageContext) -> int | None:
        return ctx.settings.land_rows_per_part

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        manifest = read_batch_manifest(ctx.store, ctx.batch)
        # as in land: an unreviewed or rejected quarantine batch stops here; a promoted one carries its target
        namespace = require_processable(ctx.store, ctx.batch)
        versions = {"landing": manifest.data_version, "manifest": manifest.sha256}
        if namespace.decision_sha256:
            versions["promotion"] = namespace.decision_sha256
        return SideInputs(versions, replace(manifest, namespace=namespace.name or manifest.namespace))

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        manifest: BatchManifest = ctx.side.data
        sizes = {entry["path"]: entry["bytes"] for entry in manifest.files}
        units: list[WorkUnit] = []
        group: list[str] = []
        group_bytes = 0
        for media_group in batch_media_groups(ctx):
            group += [layout.landed_file(ctx.batch, p) for p in media_group.paths]
            group_bytes += sum(sizes[p] for p in media_group.paths)
            if group_bytes >= ctx.settings.land_unit_bytes:
                units.append(WorkUnit(f"m{len(units):05d}", tuple(dict.fromkeys(group))))
                group, group_bytes = [], 0
        if group:
            units.append(WorkUnit(f"m{len(units):05d}", tuple(dict.fromkeys(group))))
        return units

    def prepare(
        self, ctx: StageContext, units: list[WorkUnit], output_prefix: str
    ) -> dict[str, list[MediaGroup]]:
        """Each unit's groups, in path order (the same cut ``plan`` made)."""
        by_unit: dict[str, list[MediaGroup]] = {}
        first_path = {path: unit.unit_id for unit in units for path in unit.inputs}
        for media_group in batch_media_groups(ctx):
            unit_id = first_path[layout.landed_file(ctx.batch, media_group.paths[0])]
            by_unit.setdefault(unit_id, []).append(media_group)
        return by_unit

    def process(self, unit: UnitContext) -> UnitResult:
        manifest: BatchManifest = unit.partition.side.data
        sha_of = {entry["path"]: entry["sha256"] for entry in manifest.files}
        extra: dict[str, Any] = {
            "samples": 0,
            "media_bytes": 0,
            "cas_duplicate_media": 0,
            "cas_repaired_media": 0,
        }
        records_in = 0
        with contextlib.ExitStack() as copies:
            local_copies: dict[str, Path] = {}

            def local(path: str) -> Path:
                if path not in local_copies:
                    rel = layout.landed_file(unit.batch, path)
                    local_copies[path] = copies.enter_context(unit.store.local_copy(rel))
                return local_copies[path]

            for media_group in unit.prepared.get(unit.unit.unit_id, []):
                bad = [p for p in media_group.paths if sha256_file(local(p)) != sha_of[p]]
                if bad:  # the landed bytes are not what _batch.json promised: quarantine the group
                    records_in += 1
                    unit.reject(
                        None,
                        "checksum_mismatch",
                        {"files": bad, "group": media_group.key},
                        cas_hash=sha_of[media_group.paths[0]],
                        record_index=-1,
                        text="",
                    )
                    continue
                for item in self._samples(media_group, local):
                    records_in += 1
                    container = sha_of[media_group.paths[0]]
                    if isinstance(item, MediaProblem):
                        unit.reject(
                            None,
                            item.reason,
                            {**item.details, "origin": item.origin, "key": item.key},
                            cas_hash=container,
                            record_index=item.record_index,
                            text=item.raw_prefix,
                        )
                        continue
                    unit.write(self._record(unit, manifest, item, container, extra))
        return UnitResult(records_in=records_in, extra=extra)

    @staticmethod
    def _samples(group: MediaGroup, local: Any) -> Iterator[MediaItem | MediaProblem]:
        if group.kind == "files":
            yield read_file_group(group, local)
        elif group.kind == "tar":
            yield from iter_tar_samples(group.paths[0], local(group.paths[0]))
        else:
            present = set(group.paths[1:])
            yield from iter_jsonl_samples(
                group.paths[0], local(group.paths[0]), lambda p: local(p) if p in present else None
            )

    @staticmethod
    def _record(
        unit: UnitContext, manifest: BatchManifest, item: MediaItem, container: str, extra: dict[str, Any]
    ) -> dict[str, Any]:
        media_sha = hashlib.sha256(item.media).hexdigest()
        with unit.store.staging_dir() as staging:
            path = staging / "media"
            path.write_bytes(item.media)
            stored = put_in_cas(unit.store, path, media_sha, unit.batch)
        if stored != "stored":
            extra[f"cas_{stored}_media"] += 1
        extra["samples"] += 1
        extra["media_bytes"] += len(item.media)
        return {
            "doc_id": sample_id(container, item.origin, item.record_index),
            "batch": unit.batch,
            "source": manifest.source,
            "license": manifest.license,
            "namespace": manifest.namespace,
            "cas_hash": container,
            "record_index": item.record_index,
            "origin": item.origin,
            "key": item.key,
            "modality": modality_of(item.media_ext),
            "media_sha256": media_sha,
            "media_ext": item.media_ext,
            "media_bytes": len(item.media),
            "text": item.text,
        }


STAGE = MediaLandStage()
