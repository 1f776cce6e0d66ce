"""near_dedup's MinHash signatures as work units: one per upstream part, wherever the stage's units run.

The in-process near-dup path (:mod:`.local`) needs every document's signature and band hashes before it can
join buckets; computing them is most of its time and is per document. :class:`SignatureUnits` computes one
part's signatures through :func:`.signature_arrow.signature_batches` (the body the Spark path maps too) and
writes them without the text (the driver already holds it for exact verification), so the driver only
concatenates the units' files in part order: the same table, byte for byte, as computing them in one process.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from fm_assets.engine.stage import UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.engine.unit_writer import UnitWriter
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.docs import read_docs_arrow
from fm_assets.transforms.dedup.near_dup.signature_arrow import SIG_ARROW_SCHEMA, signature_batches

CODE_VERSION = "near-dedup-signatures-v1"
SIGNATURES_SCHEMA = SIG_ARROW_SCHEMA.remove(SIG_ARROW_SCHEMA.get_field_index("text"))  # no text
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
            records += docs.num_rows
            for batch in compute(iter(docs.to_batches(max_chunksize=_ARROW_ROWS))):
                table = pa.Table.from_batches([batch]).select(SIGNATURES_SCHEMA.names)  # no text
                writer.write_table(table.cast(SIGNATURES_SCHEMA))
        return UnitResult(records_in=records)
