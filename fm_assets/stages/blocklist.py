"""blocklist: URL/domain, document-hash and source/licence-revocation removals, joined on Spark.

The lists are a side input (``side_inputs.blocklists``): their fingerprint is part of the stage key, so a
new list version recomputes this stage and everything after it, and nothing before it.
"""

from __future__ import annotations

from fm_assets.engine.kinds.removal import RemovalDecision
from fm_assets.engine.kinds.spark_removal import SparkRemovalStage, details_json
from fm_assets.engine.stage import SideInputs, StageContext
from fm_assets.side_inputs.blocklists import BlocklistSource, with_revocations
from fm_assets.transforms.blocklist.lists import Blocklists

BLOCKLISTS = "blocklists"


class BlocklistStage(SparkRemovalStage):
    name = "blocklist"
    code_version = "blocklist-v2"
    upstream = "dedup"
    description = "Blocklist joins on Spark: domains, document hashes, revoked source/licence pairs."
    side_input_assets = ("blocklists",)

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        source: BlocklistSource = ctx.resource(BLOCKLISTS)
        lists = with_revocations(source.load(), ctx.store, ctx.batch)  # + `fm revoke` records for this batch
        return SideInputs({"blocklists": lists.fingerprint()}, lists)

    def enabled(self, ctx: StageContext) -> bool:
        lists: Blocklists = ctx.side.data
        return bool(lists.url_domains or lists.doc_hashes or lists.revoked)

    def removals(self, ctx: StageContext, local_parts: list[str], output_prefix: str) -> RemovalDecision:
        from fm_assets.transforms.blocklist.joins import run_blocklists  # pyspark: imported where it runs

        table = run_blocklists(ctx.resource("spark").session(), local_parts, ctx.side.data)
        return RemovalDecision(
            {
                doc_id: (reason, details_json(details))
                for doc_id, reason, details in zip(
                    table["doc_id"].to_pylist(),
                    table["reason"].to_pylist(),
                    table["details"].to_pylist(),
                    strict=True,
                )
            }
        )


STAGE = BlocklistStage()
