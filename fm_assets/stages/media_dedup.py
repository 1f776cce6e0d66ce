"""media_dedup: exact duplicates by the sha256 of the raw media bytes, within the batch and across batches.

As text ``dedup``: the first occurrence (unit order, then row order) survives and earlier batches win; each
batch leaves ``kept_media.parquet`` (the hashes it kept) and reads every earlier batch's, whose data versions
are in its key; until every earlier landed batch has output it raises ``EarlierBatchPending``. The same
image with two captions is one image: the first pair is kept.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.checks import CheckOutcome, StageCheck
from fm_assets.engine.kinds.removal import RemovalDecision, Removals, RemovalStage
from fm_assets.engine.records import PriorOutput, StageSuccess, UnitMarker
from fm_assets.engine.refs import earlier_outputs
from fm_assets.engine.stage import SideInputs, StageContext, WorkUnit
from fm_assets.engine.store import ObjectStore, iter_parquet_batches
from fm_assets.transforms.readers.media_types import MEDIA_SCHEMA

KEPT_MEDIA = "kept_media.parquet"
MAX_DUPLICATE_RATE = 0.5  # more than this share of a batch duplicated suggests a re-delivery


def check_duplicate_rate(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Share of the stage's input removed as duplicates (a warning above ``MAX_DUPLICATE_RATE``)."""
    counts = success.counts
    rate = counts.records_rejected / counts.records_in if counts.records_in else 0.0
    return CheckOutcome(
        rate <= MAX_DUPLICATE_RATE,
        {
            "duplicate_rate": round(rate, 4),
            "threshold": MAX_DUPLICATE_RATE,
            "samples": counts.records_in,
            "by_reason": success.rejects_by_reason,
        },
        f"share of samples removed as duplicates is at most {MAX_DUPLICATE_RATE}",
    )


DUPLICATE_RATE_CHECK = StageCheck(
    "duplicate_rate",
    f"at most {MAX_DUPLICATE_RATE:.0%} of the batch's samples are duplicates",
    check_duplicate_rate,
    blocking=False,
    warn_only=True,
)


class MediaDedupStage(RemovalStage):
    name = "media_dedup"
    code_version = "media-dedup-v3"  # v3: rejects name the landed file
    upstream = "media_filter"
    description = "Exact dedup of media by raw-bytes sha256, within the batch and across all earlier batches."
    output_schema = MEDIA_SCHEMA
    checks = (DUPLICATE_RATE_CHECK,)

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        priors = earlier_outputs(ctx.store, self.name, ctx.batch)
        return SideInputs({f"media_dedup:{p.batch}": p.data_version for p in priors}, priors)

    def decide(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> RemovalDecision:
        priors: list[PriorOutput] = ctx.side.data
        seen: dict[str, tuple[str, str]] = {}  # media sha256 -> (batch, sample id) of its first occurrence
        for prior in priors:
            with ctx.store.open(layout.in_output(prior.prefix, KEPT_MEDIA)) as handle:
                table = pq.read_table(handle)
            for digest, doc_id in zip(
                table["media_sha256"].to_pylist(), table["doc_id"].to_pylist(), strict=True
            ):
                seen.setdefault(digest, (prior.batch, doc_id))
        removed: Removals = {}
        kept_hashes: list[str] = []
        kept_ids: list[str] = []
        for unit in units:
            for part in unit.inputs:
                for batch in iter_parquet_batches(ctx.store, part, columns=["doc_id", "media_sha256"]):
                    for doc_id, digest in zip(
                        batch["doc_id"].to_pylist(), batch["media_sha256"].to_pylist(), strict=True
                    ):
                        first = seen.setdefault(digest, (ctx.batch, doc_id))
                        if first == (ctx.batch, doc_id):
                            kept_hashes.append(digest)
                            kept_ids.append(doc_id)
                            continue
                        reason = "exact_duplicate" if first[0] == ctx.batch else "exact_duplicate_cross_batch"
                        removed[doc_id] = (
                            reason,
                            {
                                "duplicate_of": first[1],
                                "duplicate_of_batch": first[0],
                                "media_sha256": digest,
                            },
                        )
        kept = pa.table(
            {"media_sha256": pa.array(kept_hashes, pa.string()), "doc_id": pa.array(kept_ids, pa.string())}
        )
        return RemovalDecision(removed, {"kept": kept})

    def complete(
        self, ctx: StageContext, prepared: RemovalDecision, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        kept: pa.Table = prepared.artifacts["kept"]
        rel = layout.in_output(output_prefix, KEPT_MEDIA)
        with ctx.store.staging_dir() as staging:
            pq.write_table(kept, staging / KEPT_MEDIA, compression="zstd")
            ctx.store.put_file(staging / KEPT_MEDIA, rel)
        return {"kept_media": rel, "kept": kept.num_rows}


STAGE = MediaDedupStage()
