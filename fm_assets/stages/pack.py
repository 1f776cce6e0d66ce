"""pack: tokenized documents -> rows of T tokens, best-fit-decreasing, with document boundaries kept.

Documents of at most T tokens are never split; longer ones are split, and their pieces also fill the
gaps best-fit leaves (see ``steps.packing.pack_documents``).

Work units are runs of consecutive tokenize parts up to a token budget, so memory stays bounded and
bigger units leave fewer half-empty rows. Accounting is in documents: every document in is packed.

Per-token columns of the tokenize output (``tok_<name>``, see ``transforms.tokens.schemas``) are cut into
the same pieces as the tokens, so a document's values follow its tokens into the row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.records import StageSuccess, UnitMarker
from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import read_parquet_tables
from fm_assets.transforms.tokens.packing import gather_pieces, pack_documents
from fm_assets.transforms.tokens.schemas import (
    MISSING_TOKEN_VALUE,
    PACKED_SCHEMA,
    TOKEN_COLUMN_PREFIX,
    flat_tokens,
    token_column_names,
    token_columns_array,
    token_list_array,
)


def check_packing_efficiency(store, success: StageSuccess, stage: Any) -> CheckOutcome:
    """The floor applies to what packing controls: the rows before each unit's last one.

    Every unit ends with one partly filled row whatever the packing (its tokens are not a multiple of T), so
    padding in that row says nothing about packing quality; a tiny batch is mostly that row. The check
    grants each unit one empty row and requires the rest to meet the floor: packed tokens >=
    floor x (rows - units) x T. (``full_rows_efficiency`` is that ratio; it treats every unit's last row as
    empty, so it errs towards passing by at most one row per unit, never towards failing good packing.)
    """
    efficiency = success.artifacts["packing_efficiency"]
    floor = success.config["min_packing_efficiency"]
    seq_len = success.config["seq_len"]
    rows = success.extra.get("rows", 0)
    tokens = success.extra.get("tokens", 0)
    full_rows = max(0, rows - len(success.units))
    full_rows_efficiency = min(1.0, tokens / (full_rows * seq_len)) if full_rows else 1.0
    return CheckOutcome(
        full_rows_efficiency >= floor,
        {
            "packing_efficiency": efficiency,
            "full_rows_efficiency": full_rows_efficiency,
            "floor": floor,
            "rows": rows,
            "units": len(success.units),
            "wasted_tokens": rows * seq_len - tokens,
        },
        f"packed tokens / ((rows - one last row per unit) x T) at least {floor}",
    )


def per_token_values(
    column: pa.ChunkedArray, doc_offsets: np.ndarray, doc_ids: list[str], name: str
) -> np.ndarray:
    """One int32 per token of the unit for a per-token column: the document's list, or
    :data:`MISSING_TOKEN_VALUE` for each token of a document whose list is null.

    Raises:
        ValueError: A document's list has another length than its tokens (names the document and column).
    """
    array = column.combine_chunks().cast(pa.large_list(pa.int32()))
    assert isinstance(array, pa.LargeListArray)
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    list_offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    list_lengths = np.diff(list_offsets)
    doc_lengths = np.diff(doc_offsets)
    wrong = np.flatnonzero(valid & (list_lengths != doc_lengths))
    if len(wrong):
        d = int(wrong[0])
        raise ValueError(
            f"per-token column {TOKEN_COLUMN_PREFIX}{name} of document {doc_ids[d]} has {int(list_lengths[d])} "
            f"values for {int(doc_lengths[d])} tokens (one value per token, or null when the document has none)"
        )
    flat = array.values.to_numpy(zero_copy_only=False)
    if valid.all():
        return flat[list_offsets[0] : list_offsets[-1]]
    out = np.full(int(doc_offsets[-1]), MISSING_TOKEN_VALUE, np.int32)
    for d in np.flatnonzero(valid).tolist():
        out[doc_offsets[d] : doc_offsets[d + 1]] = flat[list_offsets[d] : list_offsets[d + 1]]
    return out


class PackStage(Stage):
    name = "pack"
    code_version = "pack-v5"  # v5: per-token columns (token_columns in the output schema)
    upstream = "tokenize"
    description = (
        "Best-fit-decreasing packing into rows of seq_len tokens; only documents longer than T split."
    )
    output_schema = PACKED_SCHEMA
    checks = (StageCheck("packing_efficiency", "packing-efficiency floor", check_packing_efficiency),)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {
            "seq_len": ctx.settings.seq_len,
            "tokens_per_unit": ctx.settings.pack_tokens_per_unit,
            "min_packing_efficiency": ctx.settings.min_packing_efficiency,
            "min_fragment": ctx.settings.pack_min_fragment,
        }

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        units: list[WorkUnit] = []
        group: list[str] = []
        budget = 0

        parts = ctx.upstream_input.parts
        counts = [
            int(table["n_tokens"].to_numpy().sum())
            for table in read_parquet_tables(ctx.store, parts, columns=["n_tokens"])
        ]
        for part, tokens in zip(parts, counts, strict=True):
            # close the unit before it would pass the budget: a unit holds at most the budget or one part
            if group and budget + tokens > ctx.settings.pack_tokens_per_unit:
                units.append(WorkUnit(f"g{len(units):05d}", tuple(group)))
                group, budget = [], 0
            group.append(part)
            budget += tokens
        if group or not units:
            units.append(WorkUnit(f"g{len(units):05d}", tuple(group)))
        return units

    def process(self, unit: UnitContext) -> UnitResult:
        ctx = unit.partition
        capacity = ctx.settings.seq_len
        tables = []
        for part in unit.unit.inputs:
            with ctx.store.open(part) as handle:
                names = token_column_names(pq.read_schema(handle))
            with ctx.store.open(part) as handle:
                wanted = ["doc_id", "tokens", *(TOKEN_COLUMN_PREFIX + n for n in names)]
                tables.append(pq.read_table(handle, columns=wanted))
        table = (
            pa.concat_tables(tables, promote_options="default")
            if tables
            else PACKED_SCHEMA.empty_table().select([])
        )
        docs = table.num_rows
        if docs == 0:
            return UnitResult(records_in=0, records_out=0, extra={"tokens": 0, "rows": 0, "capacity": 0})
        values, offsets = flat_tokens(table["tokens"])
        doc_ids = table["doc_id"].to_pylist()
        lengths = np.diff(offsets).tolist()
        bins = pack_documents(lengths, capacity, ctx.settings.pack_min_fragment)

        row_ids, row_doc_lens, row_doc_ids = [], [], []
        for row, pieces in enumerate(bins):
            row_ids.append(f"{unit.unit.unit_id}:{row}")
            row_doc_lens.append([p.length for p in pieces])
            row_doc_ids.append(
                [doc_ids[p.doc] if p.start == 0 else f"{doc_ids[p.doc]}@{p.start}" for p in pieces]
            )
        row_values, row_offsets = gather_pieces(values, offsets, bins)
        columns = {
            name: gather_pieces(
                per_token_values(table[TOKEN_COLUMN_PREFIX + name], offsets, doc_ids, name), offsets, bins
            )
            for name in token_column_names(table.schema)
        }
        packed = pa.table(
            {
                "row_id": pa.array(row_ids, pa.string()),
                "n_tokens": pa.array(np.diff(row_offsets), pa.int32()),
                "tokens": token_list_array(row_values, row_offsets),
                "doc_lens": pa.array(row_doc_lens, pa.list_(pa.int32())),
                "doc_ids": pa.array(row_doc_ids, pa.list_(pa.string())),
                "token_columns": token_columns_array(columns, len(bins)),
            },
            schema=PACKED_SCHEMA,
        )
        unit.writer.write_table(packed)
        tokens = int(row_offsets[-1])
        return UnitResult(
            records_in=docs,
            records_out=docs,
            extra={
                "tokens": tokens,
                "rows": len(bins),
                "capacity": len(bins) * capacity,
                "split_docs": sum(1 for n in lengths if n > capacity),
            },
        )

    def complete(
        self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        tokens = sum(m.extra["tokens"] for m in markers)
        capacity = sum(m.extra["capacity"] for m in markers)
        return {
            **ctx.upstream_input.artifacts,
            "seq_len": ctx.settings.seq_len,
            "packing_efficiency": tokens / capacity if capacity else 1.0,
        }


STAGE = PackStage()
