"""A Lance dataset kept in step with per-batch inputs: a release rewrites only the batches whose inputs changed.

The dataset's schema metadata records the layout its rows were made with (``fm.view_layout``: a new column
or row format rewrites the whole dataset once), and per batch the input version its rows were made from
(``fm.batch_versions``, JSON). A sync compares that record with the wanted versions; the batches whose
version differs (changed, new or removed) are *stale*, and it

1. records the stale batches as pending (and forgets their versions),
2. deletes the rows of the pending batches that may have rows (changed, removed, or pending since a sync
   that died),
3. appends the rows of the stale batches that are still wanted,
4. records the wanted versions and clears the pending list.

Each step is its own Lance version. A sync that dies between them leaves the batches it was rewriting
pending, so the next sync deletes whatever part of them was appended and writes them again: no batch twice,
none lost. A reader between the steps may see a changed batch missing, never twice. A new batch (the usual
release) costs steps 1, 3 and 4 and its own rows: the views used to be rewritten whole on every release, so
the N-th batch's release re-read the text of all N batches.

A dataset without the record, or of another layout or schema, is rewritten whole in one version.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)

LAYOUT_KEY = "fm.view_layout"
VERSIONS_KEY = "fm.batch_versions"
PENDING_KEY = "fm.batches_pending"
DELETE_BATCHES_PER_FILTER = 500  # batch ids per delete filter (a backfill may change thousands)


@dataclass(frozen=True)
class LanceSync:
    """What one sync did: the dataset's version and rows after it, and which batches it (re)wrote."""

    version: int
    rows: int
    written: bool
    rewritten_whole: bool
    batches_written: tuple[str, ...]
    batches_removed: tuple[str, ...]


@dataclass(frozen=True)
class LanceView:
    """A dataset synced per batch: where it is, its rows' schema (whose ``batch`` column names each row's
    batch) and layout, and how to make the rows of some batches."""

    uri: str
    storage_options: dict[str, str] | None
    schema: pa.Schema
    layout: str
    rows_of: Callable[[list[str]], Iterable[pa.RecordBatch]]


@dataclass(frozen=True)
class _Record:
    versions: dict[str, str]
    pending: tuple[str, ...]


def open_lance(uri: str, storage_options: dict[str, str] | None) -> Any:
    """The Lance dataset at ``uri``, or None when there is none."""
    import lance  # imported where used: lance warns when a process that imported it forks (Spark, executors)

    try:
        return lance.dataset(uri, storage_options=storage_options)
    except (ValueError, FileNotFoundError, OSError):
        return None


def _record(dataset: Any, schema: pa.Schema, layout: str) -> _Record | None:
    """What ``dataset`` holds per batch, or None when it must be rewritten whole."""
    if dataset is None:
        return None
    metadata = {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in (dataset.schema.metadata or {}).items()
    }
    if metadata.get(LAYOUT_KEY) != layout or VERSIONS_KEY not in metadata:
        return None
    if not dataset.schema.remove_metadata().equals(schema.remove_metadata()):
        return None
    try:
        versions = json.loads(metadata[VERSIONS_KEY])
        pending = json.loads(metadata.get(PENDING_KEY, "[]"))
    except json.JSONDecodeError:
        return None
    return _Record(dict(versions), tuple(pending))


def _metadata(layout: str, versions: Mapping[str, str], pending: Iterable[str] = ()) -> dict[str, str]:
    return {
        LAYOUT_KEY: layout,
        VERSIONS_KEY: json.dumps(dict(sorted(versions.items())), separators=(",", ":")),
        PENDING_KEY: json.dumps(sorted(pending)),
    }


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _non_empty(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch] | None:
    """``batches`` as an iterator, or None when it yields no row."""
    iterator = iter(batches)
    for first in iterator:
        if first.num_rows:
            return itertools.chain([first], iterator)
    return None


def sync_lance_batches(view: LanceView, wanted: Mapping[str, str]) -> LanceSync:
    """Bring ``view``'s dataset in line with ``wanted`` (batch -> input version): its rows are those
    ``view.rows_of`` yields for the wanted batches.

    The caller holds the dataset's lock (``views.LANCE_LOCK``): two syncs at once would both append a batch.
    """
    import lance

    existing = open_lance(view.uri, view.storage_options)
    record = _record(existing, view.schema, view.layout)
    if record is None:
        return _rewrite_whole(lance, existing, view, wanted)
    stale = sorted(
        batch
        for batch in set(record.versions) | set(wanted)
        if record.versions.get(batch) != wanted.get(batch)
    )
    if not stale and not record.pending:
        return LanceSync(existing.version, existing.count_rows(), False, False, (), ())
    pending = sorted(set(stale) | set(record.pending))
    kept = {batch: version for batch, version in record.versions.items() if batch not in pending}
    existing.update_schema_metadata(_metadata(view.layout, kept, pending))
    with_rows = sorted(set(record.versions) & set(pending) | set(record.pending))
    for start in range(0, len(with_rows), DELETE_BATCHES_PER_FILTER):
        chunk = with_rows[start : start + DELETE_BATCHES_PER_FILTER]
        existing.delete(f"batch IN ({', '.join(_sql_string(batch) for batch in chunk)})")
    to_write = [batch for batch in pending if batch in wanted]
    rows = _non_empty(view.rows_of(to_write)) if to_write else None
    if rows is not None:
        reader = pa.RecordBatchReader.from_batches(view.schema, rows)
        lance.write_dataset(
            reader, view.uri, schema=view.schema, mode="append", storage_options=view.storage_options
        )
    dataset = lance.dataset(view.uri, storage_options=view.storage_options)
    dataset.update_schema_metadata(_metadata(view.layout, wanted))
    dataset = lance.dataset(view.uri, storage_options=view.storage_options)
    removed = tuple(batch for batch in pending if batch not in wanted)
    log.info(
        "Lance %s: version %d, %d batches written, %d removed, %d rows",
        view.uri,
        dataset.version,
        len(to_write),
        len(removed),
        dataset.count_rows(),
    )
    return LanceSync(dataset.version, dataset.count_rows(), True, False, tuple(to_write), removed)


def _rewrite_whole(lance: Any, existing: Any, view: LanceView, wanted: Mapping[str, str]) -> LanceSync:
    """One new version holding every wanted batch (``create`` when there is no dataset: overwriting nothing
    makes Lance log a warning on stderr, which the CLI's output should not carry)."""
    with_record = view.schema.with_metadata(_metadata(view.layout, wanted))
    reader = pa.RecordBatchReader.from_batches(
        with_record, (b.replace_schema_metadata(with_record.metadata) for b in view.rows_of(sorted(wanted)))
    )
    dataset = lance.write_dataset(
        reader,
        view.uri,
        schema=with_record,
        mode="create" if existing is None else "overwrite",
        storage_options=view.storage_options,
    )
    log.info(
        "Lance %s: rewritten whole, version %d, %d rows", view.uri, dataset.version, dataset.count_rows()
    )
    return LanceSync(dataset.version, dataset.count_rows(), True, True, tuple(sorted(wanted)), ())
