"""dedup: exact duplicates by content hash, within the batch and against every earlier batch.

The first occurrence (in unit order, then row order) survives; earlier batches win over later ones.
Each batch leaves ``kept_hashes.parquet`` in its output so later batches can check against it. The
earlier batches' dedup data versions are inputs of the stage key: if one changes, this one recomputes.
"Earlier" means every earlier landed batch: until all of them have dedup output the stage raises
``EarlierBatchPending`` (``engine.refs.earlier_outputs``) instead of keeping duplicates of a batch that has
not run yet, so concurrent runs in any order write what serial runs in id order write.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.hashing import content_hash
from fm_assets.engine.kinds.removal import RemovalDecision, Removals, RemovalStage
from fm_assets.engine.records import PriorOutput, UnitMarker
from fm_assets.engine.refs import earlier_outputs
from fm_assets.engine.stage import SideInputs, StageContext, WorkUnit
from fm_assets.engine.store import iter_parquet_batches

KEPT_HASHES = "kept_hashes.parquet"


class ExactDedupStage(RemovalStage):
    name = "dedup"
    code_version = "dedup-v1"
    upstream = "filter"
    description = "Exact content-hash dedup within the batch and across all earlier batches."

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        priors = earlier_outputs(ctx.store, self.name, ctx.batch)
        return SideInputs({f"dedup:{p.batch}": p.data_version for p in priors}, priors)

    def decide(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> RemovalDecision:
        priors: list[PriorOutput] = ctx.side.data
        seen: dict[bytes, tuple[str, str]] = {}  # content hash -> (batch, doc_id) of its first occurrence
        for prior in priors:
            with ctx.store.open(layout.in_output(prior.prefix, KEPT_HASHES)) as handle:
                table = pq.read_table(handle)
            for digest, doc_id in zip(table["hash"].to_pylist(), table["doc_id"].to_pylist(), strict=True):
                seen.setdefault(digest, (prior.batch, doc_id))
        removed: Removals = {}
        kept_hashes: list[bytes] = []  # survivors in output order, for this batch's kept_hashes
        kept_ids: list[str] = []
        for unit in units:
            for part in unit.inputs:
                for record_batch in iter_parquet_batches(
                    ctx.store, part, columns=["doc_id", "text"], batch_size=4096
                ):
                    ids = record_batch["doc_id"].to_pylist()
                    for doc_id, text in zip(ids, record_batch["text"].to_pylist(), strict=True):
                        digest = content_hash(text)
                        first_batch, first_doc = seen.setdefault(digest, (ctx.batch, doc_id))
                        if (first_batch, first_doc) == (ctx.batch, doc_id):
                            kept_hashes.append(digest)
                            kept_ids.append(doc_id)
                            continue
                        reason = (
                            "exact_duplicate" if first_batch == ctx.batch else "exact_duplicate_cross_batch"
                        )
                        removed[doc_id] = (
                            reason,
                            {"duplicate_of": first_doc, "duplicate_of_batch": first_batch},
                        )
        kept = pa.table(
            {"hash": pa.array(kept_hashes, pa.binary(16)), "doc_id": pa.array(kept_ids, pa.string())}
        )
        return RemovalDecision(removed, {"kept": kept})

    def complete(
        self, ctx: StageContext, prepared: RemovalDecision, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        kept: pa.Table = prepared.artifacts["kept"]
        rel = layout.in_output(output_prefix, KEPT_HASHES)
        with ctx.store.staging_dir() as staging:
            path = staging / KEPT_HASHES
            pq.write_table(kept, path, compression="zstd")
            ctx.store.put_file(path, rel)
        return {"kept_hashes": rel, "kept": kept.num_rows}


STAGE = ExactDedupStage()
