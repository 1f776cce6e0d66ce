"""The blast radius of a revocation: where the revoked documents were, and proof they are gone now.

``affected_documents`` finds the revoked documents and media samples by id (a (source, licence) revocation:
every document and sample of the batches landed with that pair; a hash revocation: the documents whose text
sha256 matches, as the blocklist stage hashes them, and the samples whose raw media sha256 matches, as
``media_filter`` compares them). ``locate`` then finds every dataset version and shard (from the shard stage's
row table: the doc ids of every row), every Iceberg snapshot and every Lance version that held one of them,
and ``verify_latest`` reads the bytes of the shards the newest releases reference (the ``.json`` member of
every sample) and counts revoked documents in them: zero is the proof.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import posixpath
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.compliance.namespaces import (
    MODALITIES,
    curated_table_name,
    lance_uri,
    media_dataset_name,
    media_lance_uris,
    release_name,
)
from fm_assets.compliance.promotions import RELEASE_NAMESPACES
from fm_assets.compliance.revocations import REVOKED_NOTICE_MARK, Revocation, matches_batch, revoked_notice
from fm_assets.engine import layout
from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.refs import read_ref, read_success, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_loader.kinds import KnownManifest, parse_manifest

if TYPE_CHECKING:  # pyiceberg is imported where a catalog is read, not with every `fm` command
    from pyiceberg.catalog import Catalog

log = logging.getLogger(__name__)
HASH_STAGE = "dedup"  # the blocklist stage's input: its text is what a document hash is computed over
LAND_STAGES = ("land", "media_land")  # every document / media sample of a batch, by doc id
MEDIA_LAND = "media_land"  # its media_sha256 is what a media hash revocation names
READ_ROWS = 4096
MAX_SAMPLES_NAMED = 1000  # media sample ids a release entry of the report names


@dataclass
class AffectedDocuments:
    doc_ids: set[str] = field(default_factory=set)
    batches: list[str] = field(default_factory=list)  # batches holding at least one of them


def _iter_parts(store: ObjectStore, parts: list[str], columns: list[str]) -> Iterator[pa.RecordBatch]:
    for part in parts:
        with store.open(part) as handle:
            yield from pq.ParquetFile(handle).iter_batches(batch_size=READ_ROWS, columns=columns)


def _text_sha256(text: str | None) -> str:
    return hashlib.sha256((text or "").encode()).hexdigest()


def _ids_hashed(
    store: ObjectStore, stage: str, batch: str, column: str, hashes: set[str], digest: Callable[[Any], str]
) -> set[str]:
    """Doc ids of ``batch``'s ``stage`` output whose ``column`` value digests to one of ``hashes``."""
    if read_ref(store, stage, batch) is None:
        return set()
    found: set[str] = set()
    for chunk in _iter_parts(store, read_success(store, stage, batch).parts, ["doc_id", column]):
        for doc_id, value in zip(
            chunk.column("doc_id").to_pylist(), chunk.column(column).to_pylist(), strict=True
        ):
            if digest(value) in hashes:
                found.add(doc_id)
    return found


def affected_documents(store: ObjectStore, revocation: Revocation) -> AffectedDocuments:
    """The documents ``revocation`` covers, by doc id, over every landed batch."""
    found = AffectedDocuments()
    hashes = set(revocation.doc_hashes)
    for batch in list_complete_batches(store):
        ids: set[str] = set()
        if revocation.by_pair:
            manifest = read_batch_manifest(store, batch)
            if matches_batch(revocation, manifest.source, manifest.license):
                for stage in LAND_STAGES:
                    if read_ref(store, stage, batch):
                        for chunk in _iter_parts(store, read_success(store, stage, batch).parts, ["doc_id"]):
                            ids.update(chunk.column("doc_id").to_pylist())
        else:
            ids |= _ids_hashed(store, HASH_STAGE, batch, "text", hashes, _text_sha256)
            ids |= _ids_hashed(store, MEDIA_LAND, batch, "media_sha256", hashes, str)
        if ids:
            found.doc_ids |= ids
            found.batches.append(batch)
    return found


def matching_batches(store: ObjectStore, revocation: Revocation) -> list[str]:
    """The landed batches a (source, licence) revocation covers, processed or not (none for a hash one)."""
    if not revocation.by_pair:
        return []
    return [
        batch
        for batch in list_complete_batches(store)
        if matches_batch(revocation, *_pair(read_batch_manifest(store, batch)))
    ]


def landed_pairs(store: ObjectStore) -> list[tuple[str, str]]:
    """Every (source, licence) landed, sorted: what a revocation that matched nothing could have meant."""
    return sorted({_pair(read_batch_manifest(store, batch)) for batch in list_complete_batches(store)})


def _pair(manifest: Any) -> tuple[str, str]:
    return manifest.source, manifest.license


def base_doc_id(doc_id: str) -> str:
    """A packed piece ``<id>@<offset>`` (a document split over rows) belongs to document ``<id>``, a video
    clip ``<id>@c<NNN>`` to video sample ``<id>``."""
    return doc_id.split("@", 1)[0]


class ShardRows:
    """shard output folder -> {tar name -> doc ids}, read once from the shard stage's row table; for a media
    shard also its sample ids as written (a video clip's ``<video id>@c<NNN>``)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._cache: dict[str, dict[str, set[str]]] = {}
        self._samples: dict[str, dict[str, set[str]]] = {}

    def docs(self, shard_path: str) -> set[str]:
        prefix, name = posixpath.split(shard_path)
        self._load(prefix)
        return self._cache[prefix].get(name, set())

    def samples(self, shard_path: str) -> set[str]:
        """A media shard's sample ids as written (empty for a text shard, whose rows pack documents)."""
        prefix, name = posixpath.split(shard_path)
        self._load(prefix)
        return self._samples[prefix].get(name, set())

    def _load(self, prefix: str) -> None:
        if prefix not in self._cache:
            table: dict[str, set[str]] = {}
            samples: dict[str, set[str]] = {}
            success = read_success_at(self.store, prefix)
            for part in success.parts:
                with self.store.open(part) as handle:
                    rows = pq.ParquetFile(handle)
                    # a text row packs many documents (doc_ids); a media sample is one (doc_id)
                    column = "doc_ids" if "doc_ids" in rows.schema_arrow.names else "doc_id"
                    for chunk in rows.iter_batches(batch_size=READ_ROWS, columns=["shard", column]):
                        for shard, ids in zip(
                            chunk.column("shard").to_pylist(), chunk.column(column).to_pylist(), strict=True
                        ):
                            if isinstance(ids, str):
                                samples.setdefault(shard, set()).add(ids)
                            ids = [ids] if isinstance(ids, str) else ids or ()
                            table.setdefault(shard, set()).update(base_doc_id(i) for i in ids)
            self._cache[prefix] = table
            self._samples[prefix] = samples


def dataset_versions(store: ObjectStore) -> Iterator[tuple[str, str]]:
    """(dataset, version) of every release under ``datasets/``."""
    for folder in store.list("datasets"):
        name = folder.rsplit("/", 1)[-1]
        for entry in store.list(folder):
            version = entry.rsplit("/", 1)[-1]
            if store.exists(layout.dataset_manifest(name, version)):
                yield name, version


def latest_version(store: ObjectStore, name: str) -> str | None:
    rel = layout.dataset_latest(name)
    return store.read_json(rel)["version"] if store.exists(rel) else None


def read_release(store: ObjectStore, name: str, version: str) -> KnownManifest:
    """The release's manifest, whatever its sample kind (packed tokens, image-text, audio-text)."""
    rel = layout.dataset_manifest(name, version)
    return parse_manifest(store.read_bytes(rel), store.uri(rel))


def shard_paths(name: str, version: str, manifest: KnownManifest) -> list[str]:
    """Store-relative paths of the shards a release references."""
    folder = layout.dataset_dir(name, version)
    return [layout.normalize_path(f"{folder}/{entry.path}") for entry in manifest.shards]


def locate_in_releases(store: ObjectStore, affected: AffectedDocuments) -> list[dict[str, Any]]:
    """Every dataset version with a shard that holds an affected document (shards and counts named)."""
    rows = ShardRows(store)
    found = []
    for name, version in sorted(dataset_versions(store)):
        manifest = read_release(store, name, version)
        shards = {}
        for path in shard_paths(name, version, manifest):
            hit = rows.docs(path) & affected.doc_ids
            if hit:
                shards[path] = len(hit)
        if shards:
            samples = sorted(s for p in shards for s in rows.samples(p) if base_doc_id(s) in affected.doc_ids)
            found.append(
                {
                    "dataset": name,
                    "version": version,
                    "namespace": manifest.namespace,
                    "latest": latest_version(store, name) == version,
                    "already_revoked": manifest.revoked,
                    "shards": shards,
                    "documents": len({d for p in shards for d in rows.docs(p) & affected.doc_ids}),
                    # media: the samples as released (a video's clips), at most MAX_SAMPLES_NAMED
                    "samples": samples[:MAX_SAMPLES_NAMED],
                    "samples_total": len(samples),
                }
            )
    return found


def _count_ids(table: pa.Table, ids: set[str]) -> int:
    """Rows of ``table`` whose doc id (a video clip: its video's) is one of ``ids``."""
    return sum(1 for doc_id in table.column("doc_id").to_pylist() if base_doc_id(doc_id) in ids)


def locate_in_iceberg(catalog: Catalog, affected: AffectedDocuments) -> list[dict[str, Any]]:
    """Every snapshot of every namespace's curated table that held an affected document."""
    from pyiceberg.expressions import In

    found = []
    if not affected.batches:
        return found
    for namespace in RELEASE_NAMESPACES:
        name = curated_table_name(namespace)
        if not catalog.table_exists(name):
            continue
        table = catalog.load_table(name)
        current = table.current_snapshot()
        for snapshot in table.snapshots():
            scan = table.scan(
                snapshot_id=snapshot.snapshot_id,
                row_filter=In("batch", affected.batches),  # pyright: ignore[reportCallIssue] (In.__new__ vs its model)
                selected_fields=("doc_id",),
            )
            count = _count_ids(scan.to_arrow(), affected.doc_ids)
            if count:
                found.append(
                    {
                        "table": name,
                        "snapshot_id": snapshot.snapshot_id,
                        "committed_at": dt.datetime.fromtimestamp(
                            snapshot.timestamp_ms / 1000, dt.timezone.utc
                        ).isoformat(timespec="seconds"),
                        "current": current is not None and current.snapshot_id == snapshot.snapshot_id,
                        "documents": count,
                    }
                )
    return found


def lance_datasets(cloud_uri: str) -> list[str]:
    """Every namespace's Lance datasets: documents, then the image, audio and video views beside it."""
    uris = []
    for namespace in RELEASE_NAMESPACES:
        uris.append(lance_uri(cloud_uri, namespace))
        uris.extend(media_lance_uris(cloud_uri, namespace).values())
    return uris


def locate_in_lance(
    cloud_uri: str,
    affected: AffectedDocuments,
    storage_options: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every version of every namespace's Lance datasets (documents and media views) that held an affected
    document or sample (a video view's rows are clips: counted by their video)."""
    import lance  # imported here: lance warns when a process that imported it forks

    found = []
    if not affected.batches:
        return found
    batch_filter = "batch IN ({})".format(", ".join(f"'{b}'" for b in affected.batches))
    for uri in lance_datasets(cloud_uri):
        try:
            dataset = lance.dataset(uri, storage_options=storage_options)
        except (ValueError, FileNotFoundError, OSError):
            continue
        for entry in dataset.versions():
            version = lance.dataset(uri, version=entry["version"], storage_options=storage_options)
            count = _count_ids(
                version.to_table(columns=["doc_id"], filter=batch_filter),
                affected.doc_ids,
            )
            if count:
                found.append(
                    {
                        "uri": uri,
                        "version": entry["version"],
                        "current": entry["version"] == dataset.version,
                        "documents": count,
                    }
                )
    return found


def scan_shard_bytes(store: ObjectStore, path: str) -> tuple[int, set[str], set[str]]:
    """(samples, doc ids, media sample ids) read from a shard's own bytes: the ``.json`` member of every
    sample (a text row's ``doc_ids``, a media sample's ``provenance.sample_id``). Doc ids are what a
    revocation covers (a packed piece's document, a video clip's video); sample ids are as released (a
    clip's ``<video id>@c<NNN>``)."""
    samples, ids, sample_ids = 0, set(), set()
    with store.open(path) as handle, tarfile.open(fileobj=handle, mode="r|") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".json"):
                extracted = tar.extractfile(member)
                if extracted is not None:
                    samples += 1
                    meta = json.loads(extracted.read())
                    ids.update(base_doc_id(i) for i in meta.get("doc_ids", ()))
                    sample_id = (meta.get("provenance") or {}).get("sample_id")
                    if sample_id:
                        sample_ids.add(sample_id)
                        ids.add(base_doc_id(sample_id))
    return samples, ids, sample_ids


def release_names(dataset: str) -> Iterator[tuple[str, str]]:
    """(release name, namespace) of every release a pipeline writes: text, image-text, audio-text and
    video-text."""
    for namespace in RELEASE_NAMESPACES:
        yield release_name(dataset, namespace), namespace
        for modality in MODALITIES:
            yield media_dataset_name(dataset, modality, namespace), namespace


def verify_latest(store: ObjectStore, dataset: str, affected: AffectedDocuments) -> list[dict[str, Any]]:
    """For the newest release of every namespace and modality: scan each shard's bytes for the affected
    documents and samples."""
    checked = []
    for name, namespace in release_names(dataset):
        version = latest_version(store, name)
        if version is None:
            continue
        manifest = read_release(store, name, version)
        samples, found, shards = 0, set(), 0
        for path in shard_paths(name, version, manifest):
            n, ids, _ = scan_shard_bytes(store, path)
            samples += n
            shards += 1
            found |= ids & affected.doc_ids
        checked.append(
            {
                "dataset": name,
                "version": version,
                "namespace": namespace,
                "shards_scanned": shards,
                "samples_scanned": samples,
                "revoked_documents_found": len(found),
                "examples": sorted(found)[:10],
                "ok": not found,
            }
        )
    return checked


def mark_revoked(
    store: ObjectStore,
    name: str,
    version: str,
    revocation: Revocation,
    superseded_by: str | None,
) -> bool:
    """Mark a release that held revoked documents as revoked: its manifest first (from then on fm_loader
    refuses it), then card.json and card.md (each rewritten atomically: the one edit a release ever gets). A
    release already marked keeps its first mark; every step is skipped when already done, so a run killed
    half-way is completed by the next. Returns whether the manifest was marked now."""
    manifest = read_release(store, name, version)
    marked_now = not manifest.revoked
    mark = manifest.revoked or {
        "at": revocation.at,
        "reason": revocation.reason,
        "revocation_id": revocation.id,
        "superseded_by": superseded_by,
    }
    if marked_now:
        store.write_bytes(
            layout.dataset_manifest(name, version), replace(manifest, revoked=mark).to_json().encode()
        )
    card_rel = layout.dataset_card(name, version)
    if store.exists(card_rel):
        card = store.read_json(card_rel)
        if not card.get("revoked"):
            store.write_json(card_rel, {**card, "revoked": mark})
    card_md = f"{layout.dataset_dir(name, version)}/card.md"
    if store.exists(card_md):
        text = store.read_bytes(card_md).decode("utf-8")
        if REVOKED_NOTICE_MARK not in text:
            title, _, rest = text.partition("\n")
            store.write_bytes(
                card_md, "\n".join([title, "", *revoked_notice(mark), rest.lstrip("\n")]).encode()
            )
    if marked_now:
        log.info("release %s/%s marked revoked (%s)", name, version, revocation.id)
    return marked_now


def revocation_mark(store: ObjectStore, name: str, version: str) -> dict[str, Any] | None:
    """The revoked mark of a release version (None: not revoked)."""
    return read_release(store, name, version).revoked
