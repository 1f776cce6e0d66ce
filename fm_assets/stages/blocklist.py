"""blocklist: URL/domain, document-hash and source/licence-revocation removals, joined on Spark.

The lists are a versioned input: their fingerprint is part of the stage key, so a new list version
recomputes this stage and everything after it, and nothing before it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from fm_assets.stage import StageContext
from fm_assets.stage_runtime import StageRun
from fm_assets.stages.spark_stage import SparkRemovalStage, details_json
from fm_assets.steps.blocklist_spark import Blocklists, run_blocklists


@lru_cache(maxsize=8)
def load_blocklists(path: str | None) -> Blocklists:
    return Blocklists.load(path) if path else Blocklists()


class BlocklistStage(SparkRemovalStage):
    name = "blocklist"
    code_version = "blocklist-v2"
    upstream = "dedup"
    description = "Blocklist joins on Spark: domains, document hashes, revoked source/licence pairs."

    def enabled(self, ctx: StageContext) -> bool:
        lists = load_blocklists(ctx.settings.blocklist_file)
        return bool(lists.url_domains or lists.doc_hashes or lists.revoked)

    def extra_inputs(self, ctx: StageContext) -> dict[str, str]:
        return {"blocklists": load_blocklists(ctx.settings.blocklist_file).fingerprint()}

    def removals(self, ctx: StageContext, run: StageRun, local_parts: list[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        spark = ctx.resources["spark"].session()
        table = run_blocklists(spark, local_parts, load_blocklists(ctx.settings.blocklist_file))
        return {
            doc_id: (reason, details_json(details))
            for doc_id, reason, details in zip(
                table["doc_id"].to_pylist(), table["reason"].to_pylist(), table["details"].to_pylist(), strict=True
            )
        }


STAGE = BlocklistStage()
