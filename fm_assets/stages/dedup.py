"""dedup: exact duplicates by content hash, within the batch and against every earlier batch.

The first occurrence (in unit order, then row order) survives; earlier batches win over later ones.
Each batch leaves ``kept_hashes.parquet`` in its output so later batches can check against it. The
earlier batches' dedup data versions are inputs of the stage key: if one changes, this one recomputes.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.refs import batches_with_ref, read_success
from fm_assets.stage import StageContext
from fm_assets.stage_runtime import StageRun, WorkUnit, iter_parquet_batches
from fm_assets.stages.removal_stage import Removals, RemovalStage

KEPT_HASHES = "kept_hashes.parquet"


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


class ExactDedupStage(RemovalStage):
    name = "dedup"
    code_version = "dedup-v1"
    upstream = "filter"
    description = "Exact content-hash dedup within the batch and across all earlier batches."

    def _prior_batches(self, ctx: StageContext) -> list[str]:
        return [b for b in batches_with_ref(ctx.store, self.name) if b < ctx.batch]

    def extra_inputs(self, ctx: StageContext) -> dict[str, str]:
        priors = {}
        for batch in self._prior_batches(ctx):
            success = read_success(ctx.store, self.name, batch)
            priors[f"dedup:{batch}"] = success["data_version"]
            ctx.state.setdefault("prior_prefixes", {})[batch] = success["prefix"]
        return priors

    def decide_removals(self, ctx: StageContext, run: StageRun, units: list[WorkUnit]) -> Removals:
        seen: dict[bytes, tuple[str, str]] = {}  # content hash -> (batch, doc_id) of its first occurrence
        for batch, prefix in sorted(ctx.state.get("prior_prefixes", {}).items()):
            with ctx.store.open(f"{prefix}/{KEPT_HASHES}") as handle:
                table = pq.read_table(handle)
            for digest, doc_id in zip(table["hash"].to_pylist(), table["doc_id"].to_pylist(), strict=True):
                seen.setdefault(digest, (batch, doc_id))
        removed: Removals = {}
        kept: list[tuple[bytes, str]] = []  # survivors in output order, for this batch's kept_hashes
        for unit in units:
            for part in unit.inputs:
                for record_batch in iter_parquet_batches(ctx.store, part, columns=["doc_id", "text"], batch_size=4096):
                    for doc_id, text in zip(record_batch["doc_id"].to_pylist(), record_batch["text"].to_pylist(), strict=True):
                        digest = content_hash(text)
                        first_batch, first_doc = seen.setdefault(digest, (ctx.batch, doc_id))
                        if (first_batch, first_doc) == (ctx.batch, doc_id):
                            kept.append((digest, doc_id))
                            continue
                        reason = "exact_duplicate" if first_batch == ctx.batch else "exact_duplicate_cross_batch"
                        removed[doc_id] = (reason, {"duplicate_of": first_doc, "duplicate_of_batch": first_batch})
        ctx.state["kept"] = kept
        return removed

    def complete(self, ctx: StageContext, run: StageRun, markers: list[dict[str, Any]]) -> dict[str, Any]:
        kept = ctx.state["kept"]
        table = pa.table(
            {"hash": pa.array([h for h, _ in kept], pa.binary(16)), "doc_id": pa.array([d for _, d in kept], pa.string())}
        )
        with ctx.store.staging_dir() as staging:
            path = staging / KEPT_HASHES
            pq.write_table(table, path, compression="zstd")
            ctx.store.put_file(path, run.rel(KEPT_HASHES))
        return {"kept_hashes": run.rel(KEPT_HASHES), "kept": len(kept)}


STAGE = ExactDedupStage()
