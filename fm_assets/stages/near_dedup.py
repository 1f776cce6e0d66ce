"""near_dedup: MinHash LSH near-duplicate removal, against this batch and every earlier one: in-process
below ``NearDedupConfig.local_max_docs`` documents (no pyspark imported, no JVM), on Spark above.

Each batch leaves ``band_index/`` (the LSH bands and signatures of the documents it kept); a later batch is
deduplicated against the band indexes of all earlier batches, whose data versions are in its key. In-process
(below ``local_max_docs``) the MinHash signatures are units of its ``signatures`` output, spread over the
stage's workers like any unit (``engine.aux_output``); only the bucket join and the components stay in the
driver. Until every
earlier landed batch has near_dedup output the stage raises ``EarlierBatchPending`` (see ``engine.refs``)
rather than run against a partial set; when near-dup is disabled it reads no earlier batch and never waits.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pyarrow as pa

from fm_assets.engine import layout
from fm_assets.engine.aux_output import AUX_OUTPUTS, read_aux_table, run_aux_units
from fm_assets.engine.beside_units import run_beside_units
from fm_assets.engine.kinds.removal import RemovalDecision
from fm_assets.engine.kinds.spark_removal import SparkRemovalStage
from fm_assets.engine.records import PriorOutput, UnitMarker
from fm_assets.engine.refs import earlier_outputs
from fm_assets.engine.stage import SideInputs, StageContext, units_from_parts
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

log = logging.getLogger(__name__)

BAND_INDEX = "band_index"  # a folder: bands/ and signatures/ parquet files plus _SUCCESS.json


class NearDedupStage(SparkRemovalStage):
    name = "near_dedup"
    code_version = "near-dedup-v2"
    upstream = "blocklist"
    description = (
        "MinHash LSH near-dup dedup (in-process for small batches, Spark above) with a persistent "
        "cross-batch band index."
    )

    def dedup_config(self, ctx: StageContext) -> NearDedupConfig:
        return NearDedupConfig(
            threshold=ctx.settings.near_dedup_threshold,
            local_max_docs=ctx.settings.near_dedup_local_max_docs,
        )

    def enabled(self, ctx: StageContext) -> bool:
        return ctx.settings.near_dedup

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"enabled": ctx.settings.near_dedup, "minhash": self.dedup_config(ctx).fingerprint()}

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        if not self.enabled(ctx):  # a pass-through reads no earlier batch, so it has nothing to wait for
            return SideInputs({}, [])
        priors = [
            p for p in earlier_outputs(ctx.store, self.name, ctx.batch) if p.artifacts.get("band_index")
        ]
        return SideInputs({f"near_dedup:{p.batch}": p.data_version for p in priors}, priors)

    def removals(self, ctx: StageContext, local_parts: list[str], output_prefix: str) -> RemovalDecision:
        # imported here (numpy/pyarrow); pyspark only if run_near_dedup picks the Spark path
        from fm_assets.transforms.dedup.near_dup.job import run_near_dedup

        priors: list[PriorOutput] = ctx.side.data
        store = ctx.store
        index_rel = layout.in_output(output_prefix, BAND_INDEX)
        with store.staging_dir() as staging:
            prior_paths = []
            for prior in priors:
                rel = layout.in_output(prior.prefix, BAND_INDEX)
                if store.is_local:
                    prior_paths.append(str(store.local_path(rel)))
                else:
                    prior_paths.append(str(store.get_dir(rel, staging / f"prior-{prior.batch}")))
            out_index = staging / BAND_INDEX
            aux: list[str] = []  # the signatures output, when the in-process path computed one
            spark_session = ctx.resource("spark").session  # called only if the Spark engine runs
            outcome = run_near_dedup(
                spark_session,
                local_parts,
                prior_paths,
                str(out_index),
                self.dedup_config(ctx),
                signatures=lambda: self.signatures(ctx, aux),
                defer_index=True,
            )
            if outcome.write_index is None:  # the Spark path wrote it
                store.put_dir(out_index, index_rel, last=layout.SUCCESS)
        write_index = outcome.write_index
        if write_index is not None:  # the units need only the removals: the index is written beside them

            def publish_index() -> None:  # shares nothing with the units' payload (pickled meanwhile)
                started = time.perf_counter()
                with store.staging_dir() as staging:
                    rows = write_index(staging / BAND_INDEX)
                    store.put_dir(staging / BAND_INDEX, index_rel, last=layout.SUCCESS)
                log.info(
                    "near_dedup[%s]: band index of %d documents written beside the units in %.3f s",
                    ctx.batch,
                    rows,
                    time.perf_counter() - started,
                )

            run_beside_units(publish_index)
        removed = {}
        for row in outcome.removed.to_pylist():
            details = {
                "cluster_id": row["cluster_id"],
                "survivor_id": row["survivor_id"],
                "similarity": row["similarity"],
                "survivor_in_earlier_batch": row["survivor_is_prior"],
            }
            removed[row["doc_id"]] = ("near_duplicate", details)
        return RemovalDecision(removed, {"stats": outcome.stats, AUX_OUTPUTS: aux})

    def signatures(self, ctx: StageContext, aux: list[str]) -> pa.Table:
        """The batch's signature rows and where each document is (``signature_units.PLACED_SCHEMA``), computed
        as units of the ``signatures`` output (the in-process path), whose folder is appended to ``aux``."""
        from fm_assets.transforms.dedup.near_dup import signature_units as sig

        config = self.dedup_config(ctx)
        done = run_aux_units(
            ctx,
            stage=self.name,
            name="signatures",
            code_version=sig.CODE_VERSION,
            config={"minhash": config.fingerprint()},
            units=units_from_parts(ctx.upstream_input),
            process=sig.SignatureUnits(ctx.store, config),
            output_schema=sig.SIGNATURES_SCHEMA,
        )
        aux.append(done.prefix)
        return sig.placed(read_aux_table(ctx.store, done, sig.SIGNATURES_SCHEMA), ctx.upstream_input.parts)

    def complete(
        self, ctx: StageContext, prepared: RemovalDecision, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        index = layout.in_output(output_prefix, BAND_INDEX)
        has_index = ctx.store.exists(layout.success_marker(index))
        return {
            "band_index": index if has_index else None,
            "stats": dict(prepared.artifacts.get("stats", {})),
            AUX_OUTPUTS: list(prepared.artifacts.get(AUX_OUTPUTS, [])),
        }


STAGE = NearDedupStage()
