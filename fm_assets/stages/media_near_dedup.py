"""media_near_dedup: near-duplicate images and video clips by pHash, against this batch and every earlier batch.

Each batch leaves ``phash_index.parquet`` (what it kept: id, pHash, every keyframe's pHash, pixel count,
modality); a later batch joins
its images' band keys with its own and every earlier index (``transforms.dedup.image_near_dup``: on Spark,
in-process below ``local_max_nodes``, the same pairs either way), confirms pairs by Hamming distance,
clusters them and keeps the survivor (earlier batch first, then more pixels, then smallest id). Each removed
image is a ``near_duplicate`` reject naming its cluster, survivor (and its batch) and distance. Video clips
join by the pHashes of *all* their keyframes (``media_clip``'s ``keyframe_phashes``) through the same index
and clusters: the distance of two clips is the mean Hamming distance over their aligned keyframes (why the
mean: ``image_near_dup``), and a clip's reject adds ``keyframe_distances`` and ``distance_rule``. The
survivor's pixel count is its video's resolution; pairs of an image and a clip are dropped before
clustering (the index records each node's modality; an index without one holds images, one without
``phashes`` a single hash per node). Audio passes through. Earlier indexes' data versions are in the key;
until every earlier landed batch has output the stage raises ``EarlierBatchPending``. ``FM_NEAR_DEDUP=0``
turns it into a pass-through, as for text.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.kinds.removal import RemovalDecision
from fm_assets.engine.kinds.spark_removal import SparkRemovalStage
from fm_assets.engine.records import PriorOutput, UnitMarker
from fm_assets.engine.refs import earlier_outputs
from fm_assets.engine.stage import SideInputs, StageContext
from fm_assets.stages.media_dedup import DUPLICATE_RATE_CHECK
from fm_assets.transforms.dedup.image_near_dup import (
    NODES_SCHEMA,
    REASON,
    ImageNearDupConfig,
    Removal,
    candidate_pairs_local,
    candidate_pairs_spark,
    near_duplicate_removals,
    nodes_table,
    with_sequences,
)
from fm_assets.transforms.readers.media_types import IMAGE, MEDIA_SCHEMA, VIDEO

PHASH_INDEX = "phash_index.parquet"
NEAR_DUP = ImageNearDupConfig()


class MediaNearDedupStage(SparkRemovalStage):
    name = "media_near_dedup"
    # v3: rejects name the landed file; v4: video clips; v5: clips by every keyframe (mean distance), clip_*
    # columns
    code_version = "media-near-dedup-v5"
    upstream = "media_dedup"
    description = (
        "Near-duplicate images and video clips (every keyframe) by pHash banded join (Spark) with a "
        "cross-batch index; survivor rule as text."
    )
    output_schema = MEDIA_SCHEMA
    checks = (DUPLICATE_RATE_CHECK,)
    near_dup: ImageNearDupConfig = NEAR_DUP

    def enabled(self, ctx: StageContext) -> bool:
        return ctx.settings.near_dedup

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"enabled": self.enabled(ctx), "phash": self.near_dup.fingerprint()}

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        if not self.enabled(ctx):
            return SideInputs({}, [])
        priors = [
            p for p in earlier_outputs(ctx.store, self.name, ctx.batch) if p.artifacts.get("phash_index")
        ]
        return SideInputs({f"media_near_dedup:{p.batch}": p.data_version for p in priors}, priors)

    def _nodes(self, ctx: StageContext, local_parts: list[str]) -> tuple[pa.Table, list[str]]:
        """The graph's nodes and each node's modality (an index written before videos holds images)."""
        priors: list[PriorOutput] = ctx.side.data
        tables = []
        modalities: list[str] = []
        for prior in priors:
            with ctx.store.open(prior.artifacts["phash_index"]) as handle:
                index = pq.read_table(handle)
            names = index.column_names
            modalities += index["modality"].to_pylist() if "modality" in names else [IMAGE] * index.num_rows
            index = with_sequences(index.select([n for n in names if n != "modality"]))
            index = index.append_column("prior", pa.array([True] * index.num_rows))
            tables.append(index.select(NODES_SCHEMA.names).cast(NODES_SCHEMA))
        rows = []
        for path in local_parts:
            columns = ["doc_id", "modality", "phash", "keyframe_phashes", "width", "height"]
            table = pq.read_table(path, columns=columns)
            for row in table.to_pylist():
                if row["modality"] in (IMAGE, VIDEO) and row["phash"] is not None:
                    modalities.append(row["modality"])
                    rows.append(
                        {
                            "doc_id": row["doc_id"],
                            "phash": row["phash"],
                            "phashes": row["keyframe_phashes"] if row["modality"] == VIDEO else None,
                            "quality": int(row["width"]) * int(row["height"]),
                            "batch": ctx.batch,
                            "prior": False,
                        }
                    )
        return pa.concat_tables([*tables, nodes_table(rows)]), modalities

    def _details(self, removal: Removal) -> dict[str, Any]:
        """The reject's details: an image's Hamming distance; a clip's mean over keyframes and each one."""
        details: dict[str, Any] = {
            "cluster_id": removal.cluster_id,
            "survivor_id": removal.survivor_id,
            "survivor_batch": removal.survivor_batch,
            "survivor_in_earlier_batch": removal.survivor_is_prior,
            "hamming_distance": removal.distance,
            "max_distance": self.near_dup.max_distance,
        }
        if len(removal.position_distances) > 1:  # a video clip
            details["hamming_distance"] = round(removal.mean_distance, 4)
            details["keyframe_distances"] = list(removal.position_distances)
            details["distance_rule"] = "mean over aligned keyframes"
        return details

    def removals(self, ctx: StageContext, local_parts: list[str], output_prefix: str) -> RemovalDecision:
        nodes, modalities = self._nodes(ctx, local_parts)
        if nodes.num_rows <= self.near_dup.local_max_nodes:
            engine, pairs = "local", candidate_pairs_local(nodes, self.near_dup)
        else:
            engine, pairs = (
                "spark",
                candidate_pairs_spark(ctx.resource("spark").session(), nodes, self.near_dup),
            )
        # a still and a video clip are never duplicates of each other, however close their hashes
        pairs = [p for p in pairs if modalities[p[0]] == modalities[p[1]]]
        removed = {
            r.doc_id: (REASON, self._details(r))
            for r in near_duplicate_removals(nodes, pairs, self.near_dup.max_distance)
        }
        prior = nodes["prior"].to_pylist()
        ids = nodes["doc_id"].to_pylist()
        mine = nodes.filter(pa.array([not p for p in prior], type=pa.bool_()))
        keep = [not p and i not in removed for p, i in zip(prior, ids, strict=True)]
        kept = nodes.append_column("modality", pa.array(modalities, pa.string())).filter(
            pa.array(keep, type=pa.bool_())
        )
        stats = {
            "engine": engine,
            "images": mine.num_rows,
            "prior_images": nodes.num_rows - mine.num_rows,
            "pairs": len(pairs),
        }
        return RemovalDecision(removed, {"index": kept.drop_columns(["prior"]), "stats": stats})

    def complete(
        self, ctx: StageContext, prepared: RemovalDecision, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        index: pa.Table | None = prepared.artifacts.get("index")
        if index is None:  # disabled, or nothing to read
            return {"phash_index": None, "stats": {}}
        rel = layout.in_output(output_prefix, PHASH_INDEX)
        with ctx.store.staging_dir() as staging:
            pq.write_table(index, staging / PHASH_INDEX, compression="zstd")
            ctx.store.put_file(staging / PHASH_INDEX, rel)
        return {
            "phash_index": rel,
            "stats": dict(prepared.artifacts["stats"]),
            "near_dup": asdict(self.near_dup),
        }


STAGE = MediaNearDedupStage()
