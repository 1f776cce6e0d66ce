"""Exact dedup, one implementation for every chain: the first occurrence of a key survives.

A chain's dedup stage subclasses :class:`ExactDedupStage` and names its :class:`DedupKey`: the input column,
how a value becomes the key (text: ``content_hash``; media: the raw-bytes sha256 as it is), and the per-batch
index of kept keys it leaves for later batches. The first occurrence (unit order, then row order) survives
and earlier batches win. The earlier batches' data versions are inputs of the stage key; until every earlier
landed batch has output the stage raises ``EarlierBatchPending`` (``engine.refs.earlier_outputs``), so
concurrent runs in any order write what serial runs in id order write. The keys themselves (hashing a
document's whole text) are computed by units of the stage's ``keys`` output (``engine.aux_output``), spread
over its workers; the driver only reads (doc id, key) pairs and decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.aux_output import read_aux_table, run_aux_units
from fm_assets.engine.beside_units import run_beside_units
from fm_assets.engine.kinds.removal import RemovalDecision, Removals, RemovalStage
from fm_assets.engine.layout import AUX_OUTPUTS
from fm_assets.engine.records import PriorOutput, UnitMarker
from fm_assets.engine.refs import earlier_outputs
from fm_assets.engine.stage import SideInputs, StageContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore, iter_parquet_batches, read_parquet_tables
from fm_assets.engine.unit_writer import UnitWriter

KEY = "key"  # the key column of the ``keys`` auxiliary output


def _index_in(values: pa.ChunkedArray, value_set: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value's index in ``value_set`` (its first occurrence there), null where it is not in it."""
    if isinstance(value_set, pa.ChunkedArray):
        value_set = value_set.combine_chunks()
    return pc.call_function("index_in", [values], pc.SetLookupOptions(value_set))


def first_occurrences(
    keys: pa.ChunkedArray, earlier: pa.Array | pa.ChunkedArray
) -> tuple[np.ndarray, np.ndarray]:
    """For each key: the index of its first occurrence in ``earlier`` (-1: none), and the row of its first
    occurrence in ``keys``. Whole-column lookups, not a Python dict of every key: with a million earlier
    keys they take 0.1 s where the dict took 0.6 s (``bench/exact_dedup_lookup.py``)."""
    in_earlier = _index_in(keys, earlier).fill_null(-1).to_numpy().astype(np.int64)
    group = _index_in(keys, keys.unique()).to_numpy().astype(np.int64)
    return in_earlier, np.unique(group, return_index=True)[1][group]


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class DedupKey:
    """What makes two records the same, and where a batch keeps the keys it kept."""

    column: str  # the input column the key is computed from
    index_file: str  # per-batch parquet of kept keys (with doc_id), read by later batches
    index_field: pa.Field  # the key's column in that file
    artifact: str  # the index's name in the stage's artifacts
    of: Callable[..., Any] = _same  # column value (then the ``also`` columns' values) -> key
    also: tuple[str, ...] = ()  # further columns the key is computed from
    in_details: bool = False  # name the key in each reject's details (under ``column``)


class ExactDedupStage(RemovalStage):
    """Exact dedup by ``dedup_key`` within the batch and against every earlier batch."""

    dedup_key: DedupKey
    batch_rows = 2048

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        priors = earlier_outputs(ctx.store, self.name, ctx.batch)
        return SideInputs({f"{self.name}:{p.batch}": p.data_version for p in priors}, priors)

    def _earlier_keys(self, ctx: StageContext) -> pa.Table:
        """(key, doc_id, batch) of the keys the earlier batches kept, oldest batch first."""
        key = self.dedup_key
        priors: list[PriorOutput] = list(ctx.side.data)
        read = read_parquet_tables(
            ctx.store,
            [layout.in_output(prior.prefix, key.index_file) for prior in priors],
            columns=[key.index_field.name, "doc_id"],
        )
        tables = []
        for prior, table in zip(priors, read, strict=True):
            tables.append(
                pa.table(
                    [
                        table.column(key.index_field.name).cast(key.index_field.type),
                        table.column("doc_id").cast(pa.string()),
                        pa.array([prior.batch] * table.num_rows, pa.string()),
                    ],
                    names=[KEY, "doc_id", "batch"],
                )
            )
        if not tables:
            return pa.table(
                [pa.array([], key.index_field.type), pa.array([], pa.string()), pa.array([], pa.string())],
                names=[KEY, "doc_id", "batch"],
            )
        return pa.concat_tables(tables)

    def decide(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> RemovalDecision:
        key = self.dedup_key
        earlier = self._earlier_keys(ctx)
        keyed, aux = self._batch_keys(ctx, units)
        keys, ids = keyed.column(KEY), keyed.column("doc_id")
        in_earlier, first_row = first_occurrences(keys, earlier.column(KEY))
        duplicate = (in_earlier >= 0) | (first_row != np.arange(len(first_row)))
        dup = np.flatnonzero(duplicate)
        cross = in_earlier[dup] >= 0
        if cross.any():
            at = pa.array(np.where(cross, in_earlier[dup], 0))
            of_doc, of_batch = (
                earlier.column("doc_id").take(at).to_pylist(),
                earlier.column("batch").take(at).to_pylist(),
            )
        else:
            of_doc, of_batch = [None] * len(dup), [None] * len(dup)
        first_ids = ids.take(pa.array(first_row[dup])).to_pylist()
        digests = keys.take(pa.array(dup)).to_pylist() if key.in_details else []
        removed: Removals = {}
        for i, doc_id in enumerate(ids.take(pa.array(dup)).to_pylist()):
            if cross[i]:
                reason, details = (
                    "exact_duplicate_cross_batch",
                    {"duplicate_of": of_doc[i], "duplicate_of_batch": of_batch[i]},
                )
            else:
                reason, details = (
                    "exact_duplicate",
                    {"duplicate_of": first_ids[i], "duplicate_of_batch": ctx.batch},
                )
            if key.in_details:
                details[key.column] = digests[i]
            removed[doc_id] = (reason, details)
        survivors = pa.array(np.flatnonzero(~duplicate))
        kept = pa.table(
            {
                key.index_field.name: keys.take(survivors).cast(key.index_field.type),
                "doc_id": ids.take(survivors).cast(pa.string()),
            }
        ).combine_chunks()
        # the units need only the removals: the kept keys are written while they run (and stay out of the
        # units' payload)
        rel = layout.in_output(output_prefix, key.index_file)
        run_beside_units(lambda: self._write_kept(ctx.store, kept, rel))
        return RemovalDecision(removed, {"kept": kept.num_rows, AUX_OUTPUTS: [aux]})

    def _batch_keys(self, ctx: StageContext, units: list[WorkUnit]) -> tuple[pa.Table, str]:
        """(doc_id, key) of every record in unit then row order, computed by units of the ``keys`` output
        (the driver reads ids and keys, never the records), and that output's folder."""
        key = self.dedup_key
        schema = pa.schema([("doc_id", pa.string()), (KEY, key.index_field.type)])
        done = run_aux_units(
            ctx,
            stage=self.name,
            name="keys",
            code_version=f"{self.code_version}/keys-v1",
            config={"column": key.column, "also": list(key.also)},
            units=units,
            process=DedupKeyUnits(ctx.store, key, schema, self.batch_rows),
            output_schema=schema,
        )
        return read_aux_table(ctx.store, done, schema), done.prefix

    def complete(
        self, ctx: StageContext, prepared: RemovalDecision, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        return {
            self.dedup_key.artifact: layout.in_output(output_prefix, self.dedup_key.index_file),
            "kept": prepared.artifacts["kept"],
            AUX_OUTPUTS: list(prepared.artifacts.get(AUX_OUTPUTS, [])),
        }

    def _write_kept(self, store: ObjectStore, kept: pa.Table, rel: str) -> None:
        name = self.dedup_key.index_file
        with store.staging_dir() as staging:
            pq.write_table(kept, staging / name, compression="zstd")
            store.put_file(staging / name, rel)


@dataclass(frozen=True)
class DedupKeyUnits:
    """``ProcessUnit``: the dedup key of every record of the unit's parts, with its doc id, in row order."""

    store: ObjectStore
    key: DedupKey
    schema: pa.Schema
    batch_rows: int

    def __call__(self, unit: WorkUnit, writer: UnitWriter, prefix: str) -> UnitResult:
        columns = ["doc_id", self.key.column, *self.key.also]
        records = 0
        for part in unit.inputs:
            for rows in iter_parquet_batches(self.store, part, columns=columns, batch_size=self.batch_rows):
                values = zip(*(rows[c].to_pylist() for c in columns[1:]), strict=True)
                keys = [self.key.of(*value) for value in values]
                writer.write_table(
                    pa.table(
                        [rows["doc_id"], pa.array(keys, self.schema.field(KEY).type)], schema=self.schema
                    )
                )
                records += rows.num_rows
        return UnitResult(records_in=records)
