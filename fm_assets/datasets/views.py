"""Analytical views per release namespace: the Iceberg table of curated documents and the Lance documents view.

Namespaces are walls here too: each namespace has its own table and dataset (``fm.curated_documents`` and
``documents.lance`` for cloud, ``fm.curated_documents_on_device`` and ``documents_on_device.lance`` for
on_device; ``compliance.namespaces``), holding only the batches whose effective namespace it is.

``curated_documents`` keeps ``fm.curated_documents`` (identity-partitioned by batch) in step with the
``decontaminate`` refs: a batch whose data version changed has its files replaced, a batch whose version
is already recorded (table property ``fm.batch-version.<batch>``) is skipped, and every materialization
that changes data commits exactly one Iceberg snapshot. Part files are streamed in bounded chunks.

``documents_lance`` keeps a per-document Lance dataset (stats from ``decontaminate`` joined with
``n_tokens`` from ``tokenize``) in step the same way: the dataset records each batch's input version, a
release rewrites only the batches whose version changed, and an unchanged re-materialization writes nothing
(``lance_sync``).

Both are shared state written by whichever run materializes them, so each sync is one critical section
(read what the table/dataset holds, write, commit) under a lock: ``engine.locks.store_lock`` (``iceberg``,
``lance``) on a local root, and the Dagster pools of the same names on the assets (``defs/views.py``).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from fm_assets.compliance.namespaces import (
    DEFAULT_NAMESPACE,
    curated_table_name,
    effective_namespace,
    lance_uri,
)
from fm_assets.compliance.promotions import RELEASE_NAMESPACES, ReviewError
from fm_assets.datasets.lance_sync import LanceView, open_lance, sync_lance_batches
from fm_assets.engine.hashing import stable_hash
from fm_assets.engine.landing import LandingError
from fm_assets.engine.locks import store_lock
from fm_assets.engine.pool import map_on_workers
from fm_assets.engine.refs import batches_with_ref, read_ref, read_success
from fm_assets.engine.store import ObjectStore, iter_parquet_batches

if TYPE_CHECKING:  # pyiceberg is imported where a view is written, not with the code location
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

# what writing the views imports (``fm run`` imports them in the background while its preprocess run works;
# lance is left out: it warns when a process that imported it forks, as a Spark launch does)
VIEW_LIBRARIES = (  # the big ones in ~0.05-0.15 s pieces, each imported while the driver is idle
    "pyiceberg.avro.file",
    "pyiceberg.manifest",
    "pyiceberg.table",
    "pyiceberg.catalog.sql",
    "pandas",
    "pyarrow.dataset",
    "pyiceberg.io.pyarrow",
    "pyiceberg.expressions",
    "pyiceberg.partitioning",
    "pyiceberg.transforms",
)

# what those imports register hooks into while other threads use it (Dagster's event writes use SQLAlchemy
# core): imported on the calling thread first (``engine.background_imports``)
VIEW_LIBRARIES_FIRST = ("sqlalchemy.orm",)

CURATED_TABLE = curated_table_name(DEFAULT_NAMESPACE)  # the cloud table (its name predates namespaces)
VERSION_PROPERTY = "fm.batch-version."  # + batch -> the decontaminate data version the table holds
SOURCE_STAGE = "decontaminate"  # the last document-level stage: what reaches tokenize and the shards
TOKENS_STAGE = "tokenize"
CHUNK_BYTES = 64 << 20  # Arrow bytes buffered before an Iceberg data file is written
# Parquet bytes of decontaminate parts per data-file task (one data file each, written in parallel): the
# files' size against the release's wall. At 16 MB a 101 MB text batch (15 MB of Parquet) was one task, 0.35 s
# of serial release on a 2-core box whatever the workers; at 4 MB it is four. ~37k files per TB of text;
# a compaction rewrites them bigger where readers need it.
GROUP_BYTES = 4 << 20
FILES_PER_TASK = 100_000  # data-file numbers reserved per task (names must differ within one commit)
READ_ROWS = 2048  # rows per Parquet read batch
SUMMARY_BATCHES = 100  # batch ids named in a snapshot summary (a backfill may change thousands)
ICEBERG_LOCK = "iceberg"  # store_lock names (and Dagster pool names) of the two shared commits
LANCE_LOCK = "lance"
COMMIT_ATTEMPTS = 5
# pyiceberg's own retry re-applies the same file list on the new state; a batch the other writer replaced
# would then keep both copies. A lost commit must be re-planned from the new state instead: ours does that.
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}
T = TypeVar("T")


@cache
def curated_schema() -> Schema:
    """The curated documents table's Iceberg schema."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import FloatType, LongType, NestedField, StringType

    return Schema(
        NestedField(1, "doc_id", StringType(), required=True),
        NestedField(2, "batch", StringType(), required=True),
        NestedField(3, "source", StringType(), required=True),
        NestedField(4, "license", StringType(), required=True),
        NestedField(5, "namespace", StringType(), required=True),
        NestedField(6, "cas_hash", StringType(), required=True),
        NestedField(7, "record_index", LongType(), required=True),
        NestedField(8, "url", StringType(), required=False),
        NestedField(9, "lang", StringType(), required=False),
        NestedField(10, "lang_score", FloatType(), required=False),
        NestedField(11, "quality_score", FloatType(), required=False),
        NestedField(12, "pii_flags", StringType(), required=False),
        NestedField(13, "text", StringType(), required=True),
        NestedField(14, "n_chars", LongType(), required=True),
    )


@cache
def curated_partitioning() -> PartitionSpec:
    """The curated table is partitioned by batch (identity)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    return PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="batch")
    )


LANCE_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("batch", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("license", pa.string(), nullable=False),
        pa.field("lang", pa.string()),
        pa.field("quality_score", pa.float32()),
        pa.field("n_chars", pa.int64(), nullable=False),
        pa.field("n_tokens", pa.int64()),  # null when the document has not been tokenized (yet)
        pa.field("pii_flags", pa.string()),
    ]
)
_STATS_SCHEMA = LANCE_SCHEMA.remove(LANCE_SCHEMA.get_field_index("n_tokens"))  # what a part's stats hold
LANCE_LAYOUT = "documents-v1"  # the rows' format in the Lance dataset: a change rewrites it whole once


# -- Iceberg ------------------------------------------------------------------------------------


@dataclass
class CuratedSync:
    """What one sync of ``fm.curated_documents`` did."""

    snapshot_id: int | None
    rows: int
    versions: dict[str, str]  # batch -> decontaminate data version now in the table
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rows_written: int = 0

    @property
    def data_version(self) -> str:
        return stable_hash(sorted(self.versions.items()))


def curated_table(catalog: Catalog, namespace: str = DEFAULT_NAMESPACE) -> Table:
    """``namespace``'s curated documents table (``fm.curated_documents`` for cloud), created on first use."""
    from pyiceberg.exceptions import NoSuchTableError

    name = curated_table_name(namespace)
    try:
        return catalog.load_table(name)
    except NoSuchTableError:
        log.info("creating Iceberg table %s", name)
        return catalog.create_table_if_not_exists(
            name,
            schema=curated_schema(),
            partition_spec=curated_partitioning(),
            properties=TABLE_PROPERTIES,
        )


def recorded_versions(table: Table) -> dict[str, str]:
    return {
        key.removeprefix(VERSION_PROPERTY): value
        for key, value in table.properties.items()
        if key.startswith(VERSION_PROPERTY)
    }


def stage_versions(store: ObjectStore, stage: str, namespace: str | None = None) -> dict[str, str]:
    """batch -> current data version of ``stage`` for every batch that has output (of ``namespace`` only,
    when given: the batches whose effective namespace it is)."""
    versions = {}
    for batch in batches_with_ref(store, stage):
        if namespace is not None and batch_namespace(store, batch) != namespace:
            continue
        ref = read_ref(store, stage, batch)
        if ref is not None:
            versions[batch] = ref.data_version
    return versions


def batch_namespace(store: ObjectStore, batch: str) -> str | None:
    """The batch's effective namespace; None (in no view) when its landing record cannot be trusted."""
    try:
        return effective_namespace(store, batch).name
    except (LandingError, ReviewError) as exc:
        log.warning("batch %s is in no view: %s", batch, exc)
        return None


def iter_part_batches(
    store: ObjectStore, stage: str, batch: str, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The record batches of ``stage``'s current output for ``batch``, one Parquet read batch at a time."""
    for part in read_success(store, stage, batch).parts:
        yield from iter_parquet_batches(store, part, columns, READ_ROWS)


def n_chars(text: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Characters per document: the ``n_chars`` column of both views."""
    return pc.utf8_length(text).cast(pa.int64())


def curated_chunks(
    store: ObjectStore, parts: list[str], schema: pa.Schema, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[pa.Table]:
    """The documents of decontaminate ``parts`` as curated-table chunks of at most about ``chunk_bytes``."""
    pending: list[pa.RecordBatch] = []
    pending_bytes = 0
    for record_batch in (
        batch for part in parts for batch in iter_parquet_batches(store, part, batch_size=READ_ROWS)
    ):
        with_chars = record_batch.append_column("n_chars", n_chars(record_batch.column("text")))
        pending.append(with_chars.select(schema.names))
        pending_bytes += with_chars.nbytes
        if pending_bytes >= chunk_bytes:
            yield pa.Table.from_batches(pending).cast(schema)
            pending, pending_bytes = [], 0
    if pending:
        yield pa.Table.from_batches(pending).cast(schema)


@dataclass(frozen=True)
class DataFilesTask:
    """One worker's share of a sync: the curated table's data files for consecutive decontaminate parts of
    one batch, written with the table's metadata and file IO (both pickle), file names numbered from
    ``first_file``."""

    store: ObjectStore
    parts: list[str]
    metadata: Any  # pyiceberg TableMetadata
    io: Any  # pyiceberg FileIO
    write_uuid: uuid.UUID
    first_file: int
    chunk_bytes: int


def part_groups(store: ObjectStore, parts: list[str], group_bytes: int) -> list[list[str]]:
    """``parts`` in order, cut into runs of at least ``group_bytes`` of Parquet (the last may be smaller)."""
    groups: list[list[str]] = [[]]
    size = 0
    for part in parts:
        if size >= group_bytes:
            groups.append([])
            size = 0
        groups[-1].append(part)
        size += store.size(part)
    return [group for group in groups if group]


def write_data_files(task: DataFilesTask) -> list[Any]:
    """The Iceberg data files (pyiceberg ``DataFile``) of ``task``'s parts, written where this runs."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    counter = itertools.count(task.first_file)
    files: list[Any] = []
    schema = curated_schema().as_arrow()
    for chunk in curated_chunks(task.store, task.parts, schema, task.chunk_bytes):
        files.extend(
            _dataframe_to_data_files(
                task.metadata, chunk, task.io, write_uuid=task.write_uuid, counter=counter
            )
        )
    return files


class CatalogConflictError(RuntimeError):
    """Iceberg commits kept losing to concurrent writers."""


def sync_curated_namespaces(store: ObjectStore, catalog: Catalog) -> dict[str, CuratedSync]:
    """Sync every release namespace's table (cloud always; another once it has batches or a table)."""
    synced = {}
    for namespace in RELEASE_NAMESPACES:
        has_table = catalog.table_exists(curated_table_name(namespace))
        if namespace == DEFAULT_NAMESPACE or has_table or stage_versions(store, SOURCE_STAGE, namespace):
            synced[namespace] = sync_curated_documents(store, catalog, namespace=namespace)
    return synced


def foreign_rows(table: Table, namespace: str) -> int:
    """Rows of ``table``'s current snapshot whose namespace column is not ``namespace`` (the wall: 0)."""
    from pyiceberg.expressions import NotEqualTo

    if table.current_snapshot() is None:
        return 0
    scan = table.scan(row_filter=NotEqualTo("namespace", namespace), selected_fields=("doc_id",))
    return scan.to_arrow().num_rows


def sync_curated_documents(
    store: ObjectStore,
    catalog: Catalog,
    chunk_bytes: int = CHUNK_BYTES,
    *,
    table: Table | None = None,
    namespace: str = DEFAULT_NAMESPACE,
) -> CuratedSync:
    """Bring ``namespace``'s curated table in line with the current decontaminate output of every batch of
    that namespace (one snapshot); batches of other namespaces are removed from it, never added.

    Serialized by ``store_lock(store, ICEBERG_LOCK)``: two syncs at once would both see a batch as changed
    and commit it twice (or one would fail Iceberg's optimistic commit check).

    On a remote root there is no file lock; a commit that loses Iceberg's optimistic check to another
    writer is re-planned against the new table state and retried (``commit_with_retries``). ``table`` is
    the handle the first attempt starts from (default: freshly loaded).
    """
    with store_lock(store, ICEBERG_LOCK):
        return commit_with_retries(
            lambda attempt: _sync_curated_documents(
                store, catalog, chunk_bytes, table if attempt == 0 else None, namespace
            ),
            curated_table_name(namespace),
        )


def commit_with_retries(attempt: Callable[[int], T], what: str, attempts: int = COMMIT_ATTEMPTS) -> T:
    """Run ``attempt(n)`` until its commit is not beaten by a concurrent writer (backoff between tries)."""
    from pyiceberg.exceptions import CommitFailedException

    for n in range(attempts):
        try:
            return attempt(n)
        except CommitFailedException as exc:
            if n == attempts - 1:
                raise CatalogConflictError(
                    f"{what}: {attempts} commits in a row lost to concurrent writers ({exc}); another process is "
                    "committing to this table continuously. Retry later, or route commits through one writer "
                    "(the Dagster pool 'iceberg' with limit 1)"
                ) from exc
            log.warning(
                "%s: commit lost to a concurrent writer (%s); re-planning, attempt %d", what, exc, n + 2
            )
            time.sleep(0.2 * 2**n)
    raise AssertionError("unreachable")


def _sync_curated_documents(
    store: ObjectStore,
    catalog: Catalog,
    chunk_bytes: int,
    table: Table | None,
    namespace: str,
) -> CuratedSync:
    # _dataframe_to_data_files writes Parquet data files for a partitioned table from an Arrow table; the public
    # append() would make one snapshot per chunk, and streaming append() does not support partitioned tables yet.
    # The files are written by write_data_files, one task per run of parts, on the worker pool inside
    # pool.spread_over (copying a 100 MB batch's text into data files was 1.3 s of the release in one process).
    from pyiceberg.expressions import EqualTo

    table = table or curated_table(catalog, namespace)
    wanted = stage_versions(store, SOURCE_STAGE, namespace)
    recorded = recorded_versions(table)
    changed = [batch for batch, version in sorted(wanted.items()) if recorded.get(batch) != version]
    removed = sorted(set(recorded) - set(wanted))
    sync = CuratedSync(None, 0, wanted, changed, removed)
    if changed or removed:
        # a batch without a recorded version has no files: its data and its version are one commit
        stale = [
            task.file
            for batch in [*changed, *removed]
            if batch in recorded
            for task in table.scan(row_filter=EqualTo("batch", batch)).plan_files()
        ]
        commit_uuid = uuid.uuid4()
        groups = [
            group
            for batch in changed
            for group in part_groups(store, read_success(store, SOURCE_STAGE, batch).parts, GROUP_BYTES)
        ]
        tasks = [
            DataFilesTask(
                store, group, table.metadata, table.io, commit_uuid, i * FILES_PER_TASK, chunk_bytes
            )
            for i, group in enumerate(groups)
        ]
        added = [data_file for files in map_on_workers(write_data_files, tasks) for data_file in files]
        sync.rows_written = sum(int(data_file.record_count) for data_file in added)
        with table.transaction() as tx:
            if stale or added:
                summary = {
                    "fm.batches-changed": ",".join(changed[:SUMMARY_BATCHES]),
                    "fm.batches-changed-count": str(len(changed)),
                    "fm.batches-removed": ",".join(removed[:SUMMARY_BATCHES]),
                }
                with tx.update_snapshot(snapshot_properties=summary).overwrite(
                    commit_uuid=commit_uuid
                ) as overwrite:
                    for data_file in stale:
                        overwrite.delete_data_file(data_file)
                    for data_file in added:
                        overwrite.append_data_file(data_file)
            tx.set_properties(
                {**TABLE_PROPERTIES, **{f"{VERSION_PROPERTY}{batch}": wanted[batch] for batch in changed}}
            )
            if removed:
                tx.remove_properties(*(f"{VERSION_PROPERTY}{batch}" for batch in removed))
        table = catalog.load_table(curated_table_name(namespace))
        log.info(
            "%s: %d batches replaced, %d removed, %d rows written",
            curated_table_name(namespace),
            len(changed),
            len(removed),
            sync.rows_written,
        )
    snapshot = table.current_snapshot()
    sync.snapshot_id = snapshot.snapshot_id if snapshot else None
    sync.rows = int(snapshot.summary["total-records"]) if snapshot and snapshot.summary else 0
    return sync


def expected_curated_rows(store: ObjectStore, namespace: str = DEFAULT_NAMESPACE) -> int:
    """Documents the decontaminate stage kept, summed over ``namespace``'s batches (what its table must hold)."""
    return sum(
        read_success(store, SOURCE_STAGE, batch).counts.records_out
        for batch in stage_versions(store, SOURCE_STAGE, namespace)
    )


# -- Lance --------------------------------------------------------------------------------------


def _tokens_by_doc(store: ObjectStore, batch: str) -> pa.Table:
    """(doc_id, n_tokens) of ``batch``'s tokenized documents; empty when tokenize has not run."""
    if read_ref(store, TOKENS_STAGE, batch) is None:
        return pa.table({"doc_id": pa.array([], pa.string()), "n_tokens": pa.array([], pa.int64())})
    parts = [
        pa.Table.from_batches([b])
        for b in iter_part_batches(store, TOKENS_STAGE, batch, ["doc_id", "n_tokens"])
    ]
    if not parts:
        return pa.table({"doc_id": pa.array([], pa.string()), "n_tokens": pa.array([], pa.int64())})
    tokens = pa.concat_tables(parts)
    return tokens.set_column(1, "n_tokens", tokens.column("n_tokens").cast(pa.int64()))


DOCUMENT_COLUMNS = ["doc_id", "batch", "source", "license", "lang", "quality_score", "pii_flags", "text"]


def document_stats(task: tuple[ObjectStore, str]) -> pa.Table:
    """One decontaminate part's per-document stats (its text read for ``n_chars``, then dropped): run on the
    worker pool (``map_on_workers``), so reading a batch's text is spread like the stage's own units."""
    store, part = task
    tables = []
    for record_batch in iter_parquet_batches(store, part, DOCUMENT_COLUMNS, READ_ROWS):
        docs = pa.Table.from_batches([record_batch])
        tables.append(docs.append_column("n_chars", n_chars(docs.column("text"))).drop_columns("text"))
    return pa.concat_tables(tables) if tables else pa.table({})


def iter_document_rows(store: ObjectStore, batches: list[str]) -> Iterator[pa.RecordBatch]:
    """Per-document stats for ``batches``, with their token counts, as LANCE_SCHEMA record batches (each
    batch's parts read on the worker pool inside ``pool.spread_over``), in part and row order."""
    for batch in batches:
        tokens = _tokens_by_doc(store, batch)  # two narrow columns: O(documents in one batch)
        parts = read_success(store, SOURCE_STAGE, batch).parts
        found = [
            d.select(_STATS_SCHEMA.names).cast(_STATS_SCHEMA)
            for d in map_on_workers(document_stats, [(store, part) for part in parts])
            if d.num_rows
        ]
        if not found:
            continue
        docs = pa.concat_tables(found)
        # one lookup for the whole batch: a hash join per part rebuilt the batch's token table each time
        # (0.16 s of the driver on a 300 MB batch) and did not keep the rows' order
        where = pc.index_in(docs.column("doc_id"), value_set=tokens.column("doc_id"))
        docs = docs.append_column("n_tokens", tokens.column("n_tokens").take(where))
        yield from docs.select(LANCE_SCHEMA.names).cast(LANCE_SCHEMA).to_batches()


def write_documents_lance_namespaces(
    store: ObjectStore, cloud_uri: str, storage_options: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Sync every release namespace's Lance dataset (cloud always; another once it has batches or data)."""
    written = {}
    for namespace in RELEASE_NAMESPACES:
        uri = lance_uri(cloud_uri, namespace)
        if (
            namespace == DEFAULT_NAMESPACE
            or stage_versions(store, SOURCE_STAGE, namespace)
            or open_lance(uri, storage_options) is not None
        ):
            written[namespace] = write_documents_lance(store, uri, storage_options, namespace=namespace)
    return written


def write_documents_lance(
    store: ObjectStore,
    uri: str,
    storage_options: dict[str, str] | None = None,
    *,
    namespace: str = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """Bring ``namespace``'s Lance documents dataset at ``uri`` in line with its batches: only the batches whose
    decontaminate or tokenize output changed are (re)written (``lance_sync``).

    Serialized by ``store_lock(store, LANCE_LOCK)``, so the record check and the writes see the same state.
    """
    with store_lock(store, LANCE_LOCK):
        docs = stage_versions(store, SOURCE_STAGE, namespace)
        tokens = stage_versions(store, TOKENS_STAGE)
        wanted = {batch: stable_hash([docs[batch], tokens.get(batch)]) for batch in docs}
        view = LanceView(
            uri,
            storage_options,
            LANCE_SCHEMA,
            LANCE_LAYOUT,
            lambda batches: iter_document_rows(store, batches),
        )
        sync = sync_lance_batches(view, wanted)
    return {
        "version": sync.version,
        "rows": sync.rows,
        "written": sync.written,
        "batches_written": len(sync.batches_written),
        # the asset's data version: unchanged from when the dataset was rewritten whole
        "inputs_version": stable_hash([(batch, docs[batch], tokens.get(batch)) for batch in sorted(docs)]),
    }


# -- Dagster assets -----------------------------------------------------------------------------
