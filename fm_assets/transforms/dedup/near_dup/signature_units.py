"""near_dedup's MinHash signatures as work units: one per upstream part, wherever the stage's units run.

The in-process near-dup path (:mod:`.local`) needs every document's signature and band hashes before it can
join buckets; computing them is most of its time and is per document. :class:`SignatureUnits` computes one
part's signatures through :func:`.signature_arrow.signature_batches` (the body the Spark path maps too) and
writes them without the text, with where each document is (``source_part``: the upstream part file,
``row``: its row there), so the driver neither reads the texts nor the parts' ids to place them: it
concatenates the units' files in part order (the same rows, byte for byte, as computing them in one
process) and turns ``source_part`` into the part's index (:func:`placed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fm_assets.engine.stage import UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.engine.unit_writer import UnitWriter
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.docs import read_docs_arrow
from fm_assets.transforms.dedup.near_dup.signature_arrow import SIG_ARROW_SCHEMA, signature_batches

CODE_VERSION = "near-dedup-signatures-v2"  # v2: source_part and row
_NO_TEXT = SIG_ARROW_SCHEMA.remove(SIG_ARROW_SCHEMA.get_field_index("text"))
SIGNATURES_SCHEMA = _NO_TEXT.append(pa.field("source_part", pa.string())).append(pa.field("row", pa.int64()))
# what the in-process path is handed: ``part`` is the index of the document's file among the batch's parts
PLACED_SCHEMA = _NO_TEXT.append(pa.field("part", pa.int32())).append(pa.field("row", pa.int64()))
_ARROW_ROWS = 2000  # documents per Arrow batch, as everywhere the signatures are computed


@dataclass(frozen=True)
class SignatureUnits:
    """``ProcessUnit``: the signature rows of the unit's upstream parts, in row order."""

    store: ObjectStore
    config: NearDedupConfig

    def __call__(self, unit: WorkUnit, writer: UnitWriter, prefix: str) -> UnitResult:
        bands, rows = self.config.lsh()
        compute = signature_batches(self.config, bands, rows)
        records = 0
        for rel in unit.inputs:
            with self.store.local_copy(rel) as path:
                docs = read_docs_arrow([str(path)])
            first = 0
            for batch in compute(iter(docs.to_batches(max_chunksize=_ARROW_ROWS))):
                table = pa.Table.from_batches([batch]).select(_NO_TEXT.names).cast(_NO_TEXT)
                table = table.append_column("source_part", pa.array([rel] * table.num_rows, pa.string()))
                table = table.append_column("row", pa.array(np.arange(first, first + table.num_rows)))
                first += table.num_rows
                writer.write_table(table.cast(SIGNATURES_SCHEMA))
            records += docs.num_rows
        return UnitResult(records_in=records)


def placed(signatures: pa.Table, parts: Sequence[str]) -> pa.Table:
    """The units' rows (``SIGNATURES_SCHEMA``) as ``PLACED_SCHEMA``: ``source_part`` as its index in
    ``parts``, the upstream part files in the order the in-process path is given them."""
    index = pc.index_in(signatures.column("source_part"), value_set=pa.array(parts, pa.string()))
    if index.null_count:
        raise ValueError("near-dup: a signature row names a part that is not one of the batch's")
    table = signatures.select(_NO_TEXT.names)
    return table.append_column("part", index.cast(pa.int32())).append_column("row", signatures.column("row"))
