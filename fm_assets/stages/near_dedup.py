"""near_dedup: MinHash LSH near-duplicate removal on Spark, against this batch and every earlier one.

Each batch leaves ``band_index/`` (the LSH bands and signatures of the documents it kept); a later batch is
deduplicated against the band indexes of all earlier batches, whose data versions are in its key.
"""

from __future__ import annotations

from typing import Any

from fm_assets.refs import batches_with_ref, read_success
from fm_assets.stage import StageContext
from fm_assets.stage_runtime import StageRun
from fm_assets.stages.spark_stage import SparkRemovalStage
from fm_assets.steps.near_dup_spark import NearDedupConfig, run_near_dedup

BAND_INDEX = "band_index"  # a folder: bands/ and signatures/ parquet files plus _SUCCESS.json


class NearDedupStage(SparkRemovalStage):
    name = "near_dedup"
    code_version = "near-dedup-v2"
    upstream = "blocklist"
    description = "MinHash LSH near-dup dedup on Spark with a persistent cross-batch band index."

    def dedup_config(self, ctx: StageContext) -> NearDedupConfig:
        return NearDedupConfig(threshold=ctx.settings.near_dedup_threshold)

    def enabled(self, ctx: StageContext) -> bool:
        return ctx.settings.near_dedup

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"enabled": ctx.settings.near_dedup, "minhash": self.dedup_config(ctx).fingerprint()}

    def extra_inputs(self, ctx: StageContext) -> dict[str, str]:
        priors: dict[str, str] = {}
        prefixes: dict[str, str] = {}
        for batch in batches_with_ref(ctx.store, self.name):
            if batch >= ctx.batch:
                continue
            success = read_success(ctx.store, self.name, batch)
            if success["artifacts"].get("band_index"):
                priors[f"near_dedup:{batch}"] = success["data_version"]
                prefixes[batch] = success["prefix"]
        ctx.state["prior_prefixes"] = prefixes
        return priors

    def removals(self, ctx: StageContext, run: StageRun, local_parts: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        spark = ctx.resources["spark"].session()
        with ctx.store.staging_dir() as staging:
            prior_paths = []
            for batch, prefix in sorted(ctx.state["prior_prefixes"].items()):
                if ctx.store.is_local:
                    prior_paths.append(str(ctx.store.local_path(f"{prefix}/{BAND_INDEX}")))
                else:
                    prior_paths.append(str(ctx.store.get_dir(f"{prefix}/{BAND_INDEX}", staging / f"prior-{batch}")))
            out_index = staging / BAND_INDEX
            outcome = run_near_dedup(spark, local_parts, prior_paths, str(out_index), self.dedup_config(ctx))
            ctx.store.put_dir(out_index, run.rel(BAND_INDEX), last="_SUCCESS.json")
        ctx.state["near_dedup_stats"] = outcome.stats
        removed = {}
        for row in outcome.removed.to_pylist():
            details = {
                "cluster_id": row["cluster_id"],
                "survivor_id": row["survivor_id"],
                "similarity": row["similarity"],
                "survivor_in_earlier_batch": row["survivor_is_prior"],
            }
            removed[row["doc_id"]] = ("near_duplicate", details)
        return removed

    def complete(self, ctx: StageContext, run: StageRun, markers: list[dict[str, Any]]) -> dict[str, Any]:
        has_index = ctx.store.exists(run.rel(f"{BAND_INDEX}/_SUCCESS.json"))
        return {"band_index": run.rel(BAND_INDEX) if has_index else None, "stats": ctx.state.get("near_dedup_stats", {})}


STAGE = NearDedupStage()
