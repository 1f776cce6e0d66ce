"""The near-dup job in-process (numpy/pyarrow: no pyspark, no JVM) for small batches, with the Spark path's exact output.

:func:`run_local_near_dedup` runs the steps of :mod:`.job` on Arrow tables, through the same functions
wherever a function can be shared: signatures and band hashes (:func:`.signature_arrow.signature_batches`,
the body Spark maps over Arrow batches), scoring (:func:`.candidates.similarity_batches`), the survivor
rule (``clusters.survivors_in_process``, the Spark sort key in numpy), :func:`.survivors.removed_table`,
the index writer (:func:`.index.write_index_arrow`, same parts, row order and files as the Spark writer)
and the stats (:func:`.outcome.outcome_stats`). Only the relational glue is numpy: bucket pairs
(:func:`.candidates.bucket_pairs`) and components (``clusters.min_label_components``).

Documents are numbered in ``doc_id`` order, so "smallest id" (bucket order, star centre, cluster id,
survivor tie-break) is "smallest number". The equivalence needs unique, non-null doc ids and one
schema across the input files; when an input breaks that, :class:`LocalUnsupported` is raised before
anything is written and the caller runs the Spark path, whose output is then the output by definition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fm_assets.transforms.dedup.clusters import min_label_components, survivors_in_process
from fm_assets.transforms.dedup.near_dup.candidates import NodeScorer, bucket_pairs
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig
from fm_assets.transforms.dedup.near_dup.docs import (
    LocalUnsupported,
    check_doc_ids,
    check_schemas,
    read_docs_arrow,
)
from fm_assets.transforms.dedup.near_dup.index import explode_bands, read_index_arrow, write_index_arrow
from fm_assets.transforms.dedup.near_dup.outcome import NearDedupOutcome, Phases, outcome_stats
from fm_assets.transforms.dedup.near_dup.signature_arrow import SIG_ARROW_SCHEMA, signature_batches
from fm_assets.transforms.dedup.near_dup.signature_units import PLACED_SCHEMA
from fm_assets.transforms.dedup.near_dup.survivors import removed_table

__all__ = ["LocalUnsupported", "read_docs_arrow", "run_local_near_dedup"]

logger = logging.getLogger(__name__)

_ARROW_ROWS = 2000  # documents per Arrow batch (Spark's maxRecordsPerBatch); results do not depend on it

_NODES_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("quality_score", pa.float32()),
        ("signature", pa.binary()),
        ("text", pa.string()),  # in-process signatures: the text; signature units: null (see part, row)
        ("part", pa.int32()),  # signature units: the text's file (an index into the inputs), -1 for none
        ("row", pa.int64()),  # ... and its row there
        ("prior", pa.bool_()),
    ]
)
_JUDGED_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("cluster_id", pa.string()),
        ("survivor_id", pa.string()),
        ("survivor_is_prior", pa.bool_()),
        ("similarity", pa.float64()),
    ]
)


def _signatures(docs: pa.Table, config: NearDedupConfig, bands: int, rows: int) -> pa.Table:
    compute = signature_batches(config, bands, rows)
    batches = [b.cast(SIG_ARROW_SCHEMA) for b in compute(iter(docs.to_batches(max_chunksize=_ARROW_ROWS)))]
    return pa.Table.from_batches(batches, schema=SIG_ARROW_SCHEMA)


def _with_places(signatures: pa.Table, config: NearDedupConfig) -> pa.Table:
    """Signatures computed elsewhere (:mod:`.signature_units`' ``PLACED_SCHEMA``: no text, where each
    document's text is) as node rows (``part`` -1 when exact verification is off: no text is read)."""
    if signatures.schema.names != PLACED_SCHEMA.names:
        raise ValueError(f"near-dup: signature rows must have the columns {PLACED_SCHEMA.names}")
    part = signatures.column("part")
    if not config.verify_exact:
        part = pa.array(np.full(signatures.num_rows, -1, np.int32))
    rows = signatures.select([n for n in SIG_ARROW_SCHEMA.names if n != "text"])
    rows = rows.append_column("text", pa.nulls(rows.num_rows, pa.string()))
    return rows.append_column("part", part).append_column("row", signatures.column("row"))


def _prior_entries(
    prior_index_paths: list[str], batch_bands: pa.Table, batch_ids: pa.Array
) -> tuple[pa.Table, pa.Table]:
    """``candidates.prior_index`` in-process: prior band rows in this batch's buckets (``batch_bands``: band,
    band_hash) and not of a batch document, and the prior nodes they name (the others join nothing on the
    Spark path either)."""
    bands, sigs = read_index_arrow(prior_index_paths)
    # a semi join emits each prior row once however many batch rows share its bucket: no distinct needed
    buckets = batch_bands.select(["band", "band_hash"])
    bands = bands.join(buckets, keys=["band", "band_hash"], join_type="left semi")
    bands = bands.filter(pc.invert(pc.is_in(bands.column("doc_id"), value_set=batch_ids)))
    named = pc.unique(bands.column("doc_id"))
    sigs = sigs.filter(pc.is_in(sigs.column("doc_id"), value_set=named))
    if sigs.num_rows != len(named) or pc.count_distinct(sigs.column("doc_id")).as_py() != sigs.num_rows:
        raise LocalUnsupported("a prior document in this batch's buckets has no signature or several")
    return bands, sigs


def run_local_near_dedup(
    docs_parquet: list[str],
    prior_index_paths: list[str],
    out_index_path: str,
    config: NearDedupConfig,
    n_docs: int | None = None,
    signatures: Callable[[], pa.Table] | None = None,
    defer_index: bool = False,
) -> NearDedupOutcome:
    """:func:`.job.run_near_dedup` without Spark: the same removed table, index files and stats keys.

    ``signatures``: computes the batch's signature rows elsewhere (the stage's signature units, spread over
    its workers) as ``signature_units.PLACED_SCHEMA`` (``part``: an index into ``docs_parquet``), called once
    the files' schemas passed the checks (the rows' ids are checked after); None computes them here.
    ``defer_index``: return the index write as ``NearDedupOutcome.write_index`` instead of writing it (the
    removals are known without it: the stage writes it while its units apply them)."""
    phases = Phases()
    bands, rows = config.lsh()
    if signatures is None:
        docs = read_docs_arrow(docs_parquet)
        sigs = _signatures(docs, config, bands, rows)
        sigs = sigs.append_column("part", pa.array(np.full(sigs.num_rows, -1, np.int32)))
        sigs = sigs.append_column("row", pa.array(np.zeros(sigs.num_rows, np.int64)))
    else:
        # the driver reads no text, nor the parts' ids: the rows say where each document is, and the
        # scorer's workers read the few texts it needs
        check_schemas(docs_parquet)
        sigs = _with_places(signatures(), config)
        check_doc_ids(sigs.column("doc_id"))
    n_docs = sigs.num_rows if n_docs is None else n_docs
    hashed = sigs.filter(pc.greater(sigs.column("n_shingles"), 0))
    phases.lap("signatures")

    band, band_hash, parent = explode_bands(hashed.column("bands"))
    batch_bands = pa.table({"band": band, "band_hash": band_hash})
    batch_nodes = pa.table(
        [
            hashed.column("doc_id"),
            hashed.column("quality_score"),
            hashed.column("signature"),
            hashed.column("text"),
            hashed.column("part"),
            hashed.column("row"),
            pa.array(np.zeros(hashed.num_rows, dtype=bool)),
        ],
        schema=_NODES_SCHEMA,
    )
    prior_bands = None
    nodes = batch_nodes
    if prior_index_paths:
        prior_bands, prior_sigs = _prior_entries(prior_index_paths, batch_bands, hashed.column("doc_id"))
        prior_nodes = pa.table(
            [
                prior_sigs.column("doc_id"),
                prior_sigs.column("quality_score"),
                prior_sigs.column("signature"),
                pa.nulls(prior_sigs.num_rows, pa.string()),
                pa.array(np.full(prior_sigs.num_rows, -1, np.int32)),
                pa.array(np.zeros(prior_sigs.num_rows, np.int64)),
                pa.array(np.ones(prior_sigs.num_rows, dtype=bool)),
            ],
            schema=_NODES_SCHEMA,
        )
        nodes = pa.concat_tables([batch_nodes, prior_nodes])
    nodes = nodes.take(pc.sort_indices(nodes, [("doc_id", "ascending")])).combine_chunks()
    node_ids = nodes.column("doc_id")
    prior = np.asarray(nodes.column("prior"), dtype=bool)

    # each band row's node is its document's: one lookup per document, not per band row
    member = np.asarray(pc.index_in(hashed.column("doc_id"), value_set=node_ids), dtype=np.int64)[parent]
    is_prior = np.zeros(len(member), dtype=bool)
    if prior_bands is not None and prior_bands.num_rows:
        member = np.concatenate(
            [
                member,
                np.asarray(pc.index_in(prior_bands.column("doc_id"), value_set=node_ids), dtype=np.int64),
            ]
        )
        band = np.concatenate([band, np.asarray(prior_bands.column("band"), dtype=np.int32)])
        band_hash = np.concatenate([band_hash, np.asarray(prior_bands.column("band_hash"), dtype=np.int64)])
        is_prior = np.concatenate([is_prior, np.ones(prior_bands.num_rows, dtype=bool)])
    a, b = bucket_pairs(band, band_hash, member, is_prior, config.max_bucket_pairs)
    scorer = NodeScorer(nodes, config, text_paths=None if signatures is None else docs_parquet)
    similarity = scorer.score(a, b)
    edge = similarity >= config.threshold
    n_candidates, n_edges = len(a), int(np.count_nonzero(edge))
    phases.lap("candidates_verify")

    judged = None
    rounds = 0
    if n_edges:
        labels, rounds = min_label_components(a[edge], b[edge], nodes.num_rows)
        phases.lap("components")
        members = np.unique(np.concatenate([a[edge], b[edge]]))
        component = labels[members]
        survivor = survivors_in_process(
            component, members, prior[members], nodes.column("quality_score").take(pa.array(members))
        )
        lost = ~prior[members] & (members != survivor)
        losers, their_survivor = members[lost], survivor[lost]
        to_survivor = scorer.score(losers, their_survivor)
        judged = pa.table(
            [
                node_ids.take(pa.array(losers)),
                node_ids.take(pa.array(component[lost])),
                node_ids.take(pa.array(their_survivor)),
                pa.array(prior[their_survivor]),
                pa.array(to_survivor),
            ],
            schema=_JUDGED_SCHEMA,
        )
    removed = removed_table(judged, config.survivor_floor())
    phases.lap("survivors")

    kept = hashed.filter(pc.invert(pc.is_in(hashed.column("doc_id"), value_set=removed.column("doc_id"))))
    kept = kept.select(["doc_id", "quality_score", "signature", "bands"])

    def write_index(out: Path) -> int:
        return write_index_arrow(kept, out, config)

    index_rows = kept.num_rows if defer_index else write_index(Path(out_index_path))
    phases.lap("index")  # deferred: only the kept rows' selection (the caller logs the write's seconds)

    stats = outcome_stats(
        engine="local",
        config=config,
        n_docs=n_docs,
        index_rows=index_rows,
        removed=removed,
        judged=judged,
        candidate_pairs=n_candidates,
        verified_edges=n_edges,
        cc_iterations=rounds,
        prior_indexes=len(prior_index_paths),
        phases=phases,
    )
    logger.info("near-dup dedup (in-process): %s", stats)
    return NearDedupOutcome(
        removed=removed, index_rows=index_rows, stats=stats, write_index=write_index if defer_index else None
    )
