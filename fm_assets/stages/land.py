"""land: copy raw files into the content-addressed store and parse them into document records.

Landed files are grouped into work units of about ``land_unit_bytes`` (path order); output parts roll over
every ``land_part_bytes`` of text, which sets the unit size of every later stage. The raw bytes go to
``cas/<h[:2]>/<h>`` (write-once); a file whose bytes are already there (from this or an earlier batch) is
recorded as an exact duplicate at ingest, after re-verifying the stored copy (a damaged one is replaced).
Unparseable input (invalid UTF-8, truncated archives, malformed JSON, ...) is quarantined here. A record's own
``id`` and licence are kept as ``source_id`` and ``record_license``; a record whose licence is not the batch's
is quarantined (``license_conflict``, ``transforms.readers.provenance``), never relabelled.

Files the media chain reads (images, audio, their caption/transcript companions, tars, ``*.media.jsonl``:
``transforms.readers.media_samples.media_claims``) are not documents: land counts them (``media_files``) and
lists them with what they are in its unit markers, and ``media_land`` takes them into the CAS.

A file bigger than ``land_unit_bytes`` is a unit of its own, and a plain JSONL one (not compressed, not
the media chain's) is cut into several: line-aligned byte spans of about ``land_unit_bytes`` (at least
``MIN_RANGE_BYTES``), so one 100 MB file spreads over the worker pool. The spans are whole chunks of the
file's line index (``engine.line_index``: 1 MiB line-aligned chunks, each with its first line number and
sha256), which ``fm land`` put into the manifest entry from the read that hashed the file: the plan reads a
few head bytes to tell the format and no more, so its cost does not grow with the batch's bytes. A manifest
without a line index (landed by another writer, or before indexes) is indexed here, in one read that also
checks the file's sha256 against the manifest (a file that does not match, or that holds only blank lines,
stays whole and is quarantined or rejected as before); both give the same spans. So the plan is a function
of the manifest and the settings only, whatever the worker count. A span rides on ``WorkUnit.span`` (the
input stays the file's real path, which the executor meters and records in the unit marker; a path with a
range suffix would name no file); its unit reads its lines through the same line reader as the whole file,
numbered from the span's place in the file, so records, rejects, doc ids and byte offsets are those of the
whole-file read. Each span's unit first checks its chunks' sha256s and line counts and that it starts on a
line (``line_index.check_span``): the spans tile the file, so together the units verify every byte and line
number the plan used. One more unit (``g<n>w``, span ``WholeFile``) rehashes the whole file against the
manifest and puts it into the CAS, beside the spans rather than inside the first one (which then took three
times as long as the others: on many workers the stage waited on it). A unit that finds the bytes changed
since they were landed or planned fails (``DamagedDataError``) and leaves a note
(``layout.rescan_notes``): the re-run's plan reads that file itself, so a file that no longer matches its
manifest is planned whole and quarantined once.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from fm_assets.compliance.namespaces import require_processable
from fm_assets.engine import layout
from fm_assets.engine.hashing import sha256_file
from fm_assets.engine.integrity import HASH_THREADS, DamagedDataError
from fm_assets.engine.landing import BatchManifest, read_batch_manifest
from fm_assets.engine.line_index import LineIndex, LineIndexError, LineSpan, check_span, index_lines
from fm_assets.engine.schemas import make_doc_id
from fm_assets.engine.stage import SideInputs, Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.readers import (
    DEFAULT_MAX_RECORD_BYTES,
    RawRecord,
    RawReject,
    UnsupportedFormat,
    detect_format,
    iter_raw_records,
)
from fm_assets.transforms.readers.detect import HEAD_BYTES, JSONL
from fm_assets.transforms.readers.line_ranges import iter_jsonl_range
from fm_assets.transforms.readers.media_samples import media_claims
from fm_assets.transforms.readers.provenance import LICENSE_CONFLICT, record_provenance

log = logging.getLogger(__name__)

# a range below this saves less than its unit costs (a task, a marker, its own output parts)
MIN_RANGE_BYTES = 1 << 20


@dataclass(frozen=True)
class WholeFile:
    """The span of a ranged file's own unit: verify the whole file and put it into the CAS (no records)."""


class LandStage(Stage):
    name = "land"
    # v5: a big plain JSONL file is cut into line-aligned byte-range units (and any file above
    # land_unit_bytes is a unit of its own), so unit ids and part files differ from v4's; v6: a ranged file's
    # CAS copy is a unit of its own (g<n>w), not part of its first range's; v7: ranges are spans of the
    # file's line index (1 MiB chunks, from the manifest), so the cut points moved to chunk boundaries
    code_version = "land-v7"
    upstream = None
    description = "Raw files -> content-addressed store -> parsed document records (bad input quarantined)."
    # lxml: the units parse pages, the driver does not
    worker_modules = ("fm_assets.transforms.readers.html_text",)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "rows_per_part": ctx.settings.land_rows_per_part,
            "unit_bytes": ctx.settings.land_unit_bytes,
            "part_bytes": ctx.settings.land_part_bytes,
        }

    def rows_per_file(self, ctx: StageContext) -> int | None:
        return ctx.settings.land_rows_per_part

    def bytes_per_file(self, ctx: StageContext) -> int | None:
        return ctx.settings.land_part_bytes

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        manifest = read_batch_manifest(ctx.store, ctx.batch)
        # an unreviewed or rejected quarantine batch stops here, before anything is written
        namespace = require_processable(ctx.store, ctx.batch)
        # the manifest's own hash too: its licence/namespace go into every record
        versions = {"landing": manifest.data_version, "manifest": manifest.sha256}
        if namespace.decision_sha256:  # a promotion changes the namespace every record carries
            versions["promotion"] = namespace.decision_sha256
        return SideInputs(versions, replace(manifest, namespace=namespace.name or manifest.namespace))

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        """Files in path order, grouped into units of about ``land_unit_bytes``: the unit count follows bytes,
        so 5,000 tiny files cost about what one file of the same bytes does. A bigger file is a unit of its
        own (``g<n>``), or, plain JSONL, one unit per line-aligned range (``g<n>r<k>``) after
        its whole-file unit (``g<n>w``: the CAS copy)."""
        manifest: BatchManifest = ctx.side.data
        claims = media_claims(entry["path"] for entry in manifest.files)
        unit_bytes = ctx.settings.land_unit_bytes
        files = sorted(manifest.files, key=lambda f: f["path"])
        big = [entry for entry in files if entry["bytes"] > unit_bytes and entry["path"] not in claims]
        ranges_of = dict(zip([entry["path"] for entry in big], file_spans(ctx, big), strict=True))
        units: list[WorkUnit] = []
        slot = 0  # a group, or one big file (all its ranges)
        group: list[str] = []
        group_bytes = 0
        for entry in files:
            raw_rel = layout.landed_file(ctx.batch, entry["path"])
            if entry["bytes"] <= unit_bytes:
                group.append(raw_rel)
                group_bytes += entry["bytes"]
                if group_bytes < unit_bytes:
                    continue
                units.append(WorkUnit(f"g{slot:05d}", tuple(group)))
            else:
                if group:
                    units.append(WorkUnit(f"g{slot:05d}", tuple(group)))
                    slot += 1
                ranges = ranges_of.get(entry["path"], ())
                if len(ranges) > 1:
                    # the whole-file unit first: it reads the most, so the pool starts it first
                    units.append(WorkUnit(f"g{slot:05d}w", (raw_rel,), WholeFile()))
                    units.extend(
                        WorkUnit(f"g{slot:05d}r{k:03d}", (raw_rel,), span) for k, span in enumerate(ranges)
                    )
                else:
                    units.append(WorkUnit(f"g{slot:05d}", (raw_rel,)))
            slot += 1
            group, group_bytes = [], 0
        if group:
            units.append(WorkUnit(f"g{slot:05d}", tuple(group)))
        return units

    def prepare(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> dict[str, str]:
        """The batch's media files (path -> what they are): a caption's media file may sit in another unit."""
        manifest: BatchManifest = ctx.side.data
        return media_claims(entry["path"] for entry in manifest.files)

    def process(self, unit: UnitContext) -> UnitResult:
        by_path = {entry["path"]: entry for entry in unit.partition.side.data.files}
        claims: dict[str, str] = unit.prepared or {}
        span = unit.unit.span
        records_in = 0
        extra: dict[str, Any] = {"bytes_in": 0, "files": 0, "cas_duplicate_files": 0, "cas_repaired_files": 0}
        media: list[dict[str, str]] = []
        for raw_rel in unit.unit.inputs:
            entry = by_path[layout.landed_rel_in_batch(raw_rel)]
            if entry["path"] in claims:  # read by media_land, not a document
                media.append({"path": entry["path"], "as": claims[entry["path"]]})
                continue
            if isinstance(span, WholeFile):
                self._store_whole(unit, raw_rel, entry, extra)
                extra["files"] += 1  # a ranged file counts once, here
                continue
            if isinstance(span, LineSpan):
                records_in += self._land_range(unit, raw_rel, entry, span, extra)
                extra["bytes_in"] += span.end - span.start
                extra["line_range"] = {"file": entry["path"], "start": span.start, "end": span.end}
                continue
            records_in += self._land_file(unit, raw_rel, entry, extra)
            extra["bytes_in"] += entry["bytes"]
            extra["files"] += 1
        extra["media_files"] = len(media)
        if media:
            extra["media_claimed"] = media
        return UnitResult(records_in=records_in, extra=extra, empty_part=not isinstance(span, WholeFile))

    def _land_file(
        self, unit: UnitContext, raw_rel: str, entry: dict[str, Any], extra: dict[str, Any]
    ) -> int:
        """Copy one landed file into the CAS and parse it; returns its records in."""
        ctx = unit.partition
        rel_in_batch, sha = entry["path"], entry["sha256"]
        with ctx.store.local_copy(raw_rel) as local:
            stored, actual = verify_into_cas(ctx.store, local, sha, ctx.batch)
            if stored is None:  # the landed bytes are not what _batch.json promised: quarantine the file
                unit.reject(
                    None,
                    "checksum_mismatch",
                    {"file": rel_in_batch, "expected_sha256": sha, "actual_sha256": actual},
                    cas_hash=actual,
                    record_index=-1,
                    text="",
                )
                return 1
            self._count_cas(extra, stored)
            return self._emit(unit, entry, iter_raw_records(local))

    @staticmethod
    def _changed_after_plan(unit: UnitContext, entry: dict[str, Any], what: str) -> DamagedDataError:
        """The file no longer matches what the plan cut it by: noted (``layout.rescan_notes``), so the next
        plan reads the file itself, and then cuts it again or, if it no longer matches its manifest,
        quarantines it whole, once."""
        ctx = unit.partition
        path = entry["path"]
        note = f"{hashlib.sha256(path.encode()).hexdigest()[:32]}.json"
        ctx.store.write_json(
            f"{layout.rescan_notes(LandStage.name, ctx.batch)}/{note}",
            {"path": path, "unit": unit.unit.unit_id, "found": what},
        )
        return DamagedDataError(
            f"land[{ctx.batch}] unit {unit.unit.unit_id}: {path} {what}: it changed after it was landed or "
            "planned; run land again: it is then read whole, and quarantined if it no longer matches its "
            "manifest"
        )

    def _store_whole(
        self, unit: UnitContext, raw_rel: str, entry: dict[str, Any], extra: dict[str, Any]
    ) -> None:
        """Verify a ranged file whole (the plan found it to be the manifest's) and put it into the CAS."""
        ctx = unit.partition
        with ctx.store.local_copy(raw_rel) as local:
            stored, actual = verify_into_cas(ctx.store, local, entry["sha256"], ctx.batch)
            if stored is None:
                found = f"sha256 {actual[:12]}, landed as {entry['sha256'][:12]}"
                raise self._changed_after_plan(unit, entry, found)
            self._count_cas(extra, stored)

    def _land_range(
        self, unit: UnitContext, raw_rel: str, entry: dict[str, Any], span: LineSpan, extra: dict[str, Any]
    ) -> int:
        """Parse one planned span of a file, once its bytes and line count are the line index's; returns its
        records in."""
        ctx = unit.partition
        with ctx.store.open(raw_rel) as raw:  # on S3, ranged reads of this span: the file is not downloaded
            stale = check_span(raw, span)
            if stale is not None:  # the plan read no byte of it: these are not what was landed or scanned
                raise self._changed_after_plan(unit, entry, stale)
            items = iter_jsonl_range(raw, span, max_record_bytes=DEFAULT_MAX_RECORD_BYTES, text_field="text")
            return self._emit(unit, entry, items)

    @staticmethod
    def _count_cas(extra: dict[str, Any], stored: str) -> None:
        if stored != "stored":
            extra[f"cas_{stored}_files"] += 1

    def _emit(self, unit: UnitContext, entry: dict[str, Any], items: Iterable[RawRecord | RawReject]) -> int:
        """Write the document records of one file's ``items`` (rejects and licence conflicts quarantined);
        returns the records in."""
        ctx = unit.partition
        manifest: BatchManifest = ctx.side.data
        rel_in_batch, sha = entry["path"], entry["sha256"]
        records_in = 0
        for item in items:
            records_in += 1
            if isinstance(item, RawReject):
                unit.reject(
                    None,
                    item.reason,
                    {**item.details, "file": rel_in_batch},
                    cas_hash=sha,
                    record_index=item.record_index,
                    text=item.raw_prefix,
                )
                continue
            provenance = record_provenance(item.meta, manifest.license)
            record = {
                "doc_id": make_doc_id(sha, item.record_index),
                "batch": ctx.batch,
                "source": manifest.source,
                "license": manifest.license,
                "namespace": manifest.namespace,
                "cas_hash": sha,
                "record_index": item.record_index,
                "url": item.url or f"cas://{sha}#{item.record_index}",
                "text": item.text or "",
                "lang": None,
                "lang_score": None,
                "quality_score": None,
                "pii_flags": None,
                "source_id": provenance.source_id,
                "record_license": provenance.record_license,
            }
            if provenance.conflict is not None:  # never relabelled with the batch's licence: quarantined
                details = {**provenance.conflict, "source_id": provenance.source_id, "file": rel_in_batch}
                unit.reject(record, LICENSE_CONFLICT, details)
                continue
            unit.write(record)
        return records_in


def file_spans(ctx: StageContext, entries: list[dict[str, Any]]) -> list[tuple[LineSpan, ...]]:
    """``line_spans`` of each landed file in ``entries``, several at a time (a file with no usable line index
    is read, and hashlib releases the GIL)."""
    if not entries:
        return []
    rescan = {
        ctx.store.read_json(rel)["path"]
        for rel in ctx.store.list(layout.rescan_notes(LandStage.name, ctx.batch))
    }

    def spans(entry: dict[str, Any]) -> tuple[LineSpan, ...]:
        raw_rel = layout.landed_file(ctx.batch, entry["path"])
        unit_bytes = ctx.settings.land_unit_bytes
        return line_spans(ctx.store, raw_rel, entry, unit_bytes, use_index=entry["path"] not in rescan)

    with ThreadPoolExecutor(HASH_THREADS) as pool:
        return list(pool.map(spans, entries))


def line_spans(
    store: ObjectStore, raw_rel: str, entry: dict[str, Any], unit_bytes: int, *, use_index: bool = True
) -> tuple[LineSpan, ...]:
    """The line-aligned spans the landed file ``raw_rel`` is read in, or () when it is read whole: it is not
    plain JSONL, not big enough for two spans, or holds no non-blank byte; or, when it had to be read here,
    its bytes are not the manifest's (its unit then quarantines it). The spans come from the manifest's line
    index when it has a sound one and ``use_index``; else from a line index taken here (the same spans)."""
    pieces = math.ceil(entry["bytes"] / max(unit_bytes, MIN_RANGE_BYTES))
    if pieces < 2:
        return ()
    with store.open(raw_rel) as handle:
        try:
            fmt = detect_format(PurePosixPath(raw_rel).name, handle.read(HEAD_BYTES))
        except UnsupportedFormat:
            return ()
        if fmt != JSONL:
            return ()
        index = _manifest_index(entry) if use_index else None
        if index is None:
            handle.seek(0)
            sha256, index = index_lines(handle, entry["bytes"])
            if sha256 != entry["sha256"]:
                return ()
    return index.spans(pieces) if index.has_content else ()


def _manifest_index(entry: dict[str, Any]) -> LineIndex | None:
    if "line_index" not in entry:
        return None  # landed before line indexes, or by another writer
    try:
        return LineIndex.from_json(entry["line_index"], int(entry["bytes"]))
    except LineIndexError as exc:
        log.warning("%s: %s; reading the file to cut it instead", entry["path"], exc)
        return None


def verify_into_cas(store: ObjectStore, local: Path, sha: str, batch: str) -> tuple[str | None, str]:
    """``local`` into the CAS under ``sha`` when its bytes are ``sha``'s: (what happened, as ``put_in_cas``
    says, or None when they are not and nothing was written; the sha256 of ``local``'s bytes). A new object
    costs one read of ``local``, hashed while it is copied."""
    rel = layout.cas_object(sha)
    if not store.exists(rel):
        actual = store.put_file_hashed(local, rel, sha)
        return ("stored" if actual == sha else None), actual
    actual = sha256_file(local)
    return (put_in_cas(store, local, sha, batch) if actual == sha else None), actual


def put_in_cas(store: ObjectStore, local: Path, sha: str, batch: str) -> str:
    """Write-once by content; an object already there is re-verified, and replaced if it was damaged.

    Returns what happened: ``stored``, ``duplicate`` (already there and intact) or ``repaired``."""
    rel = layout.cas_object(sha)
    outcome = "stored"
    if store.exists(rel):
        with store.local_copy(rel) as existing:
            if sha256_file(existing) == sha:
                return "duplicate"
        log.warning("CAS object %s was damaged; restored from batch %s", rel, batch)
        outcome = "repaired"
    store.put_file(local, rel)
    return outcome


STAGE = LandStage()
