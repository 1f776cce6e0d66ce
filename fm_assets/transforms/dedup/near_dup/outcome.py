"""What a near-dup call returns, and its stats, built the same way by the Spark and the in-process path."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

Engine = Literal["local", "spark"]


@dataclass
class NearDedupOutcome:
    removed: pa.Table  # REMOVED_SCHEMA, sorted by doc_id
    index_rows: int  # documents written to the band index (or to be written by ``write_index``)
    stats: dict = field(default_factory=dict)
    # the in-process path asked to defer its index (``defer_index``): writes it to the folder it is given,
    # returns the documents written; None once the call wrote it to its ``out_index_path``
    write_index: Callable[[Path], int] | None = None


class Phases:
    """Seconds per phase, in call order (``lap(name)`` closes the phase that just ended)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._mark = self.started
        self.seconds: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._mark, 3)
        self._mark = now


def outcome_stats(
    *,
    engine: Engine,
    config: NearDedupConfig,
    n_docs: int,
    index_rows: int,
    removed: pa.Table,
    judged: pa.Table | None,
    candidate_pairs: int,
    verified_edges: int,
    cc_iterations: int,
    prior_indexes: int,
    phases: Phases,
) -> dict:
    """The stats of one call; every key but ``engine``, ``cc_iterations`` (Spark: large-star/small-star
    rounds; local: min-label propagation rounds), ``seconds`` and ``phase_seconds`` is the same on both paths."""
    bands, rows = config.lsh()
    return {
        "engine": engine,
        "docs": n_docs,
        "empty_docs": n_docs - index_rows - removed.num_rows,
        "bands": bands,
        "rows": rows,
        "candidate_pairs": candidate_pairs,
        "verified_edges": verified_edges,
        # every component holds at least one non-survivor of this batch (edges always touch this batch
        # and a prior document outranks it), so the judged rows name every cluster
        "clusters": 0 if judged is None else len(pc.unique(judged.column("cluster_id"))),
        "removed": removed.num_rows,
        "removed_against_prior": int(pc.sum(removed.column("survivor_is_prior")).as_py() or 0),
        "chain_kept": 0 if judged is None else judged.num_rows - removed.num_rows,
        "cc_iterations": cc_iterations,
        "prior_indexes": prior_indexes,
        "seconds": round(time.perf_counter() - phases.started, 3),
        "phase_seconds": phases.seconds,
        "config": config.fingerprint(),
    }
