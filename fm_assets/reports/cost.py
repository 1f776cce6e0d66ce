"""Cost attribution: what each stage of every chain (text and media) cost per batch, labelled by namespace,
source and team.

The executor meters every unit (``UnitMarker.cpu_seconds``, ``bytes_read``) and sums them into the stage's
``_SUCCESS.json`` (``StageSuccess.cost``: CPU seconds, bytes read, bytes written by the units, bytes stored in
the output folder). Here each output is labelled with its batch's namespace and source and the team that
owns the source (``FM_COST_TEAMS``: a JSON map source -> team; unmapped sources are ``unassigned``), and
rows are summed per label value and stage for `fm report --cost` and the dataset card. Each row names its
chain; the text release's card asks for the text chain only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fm_assets.engine.landing import list_complete_batches, read_batch_manifest
from fm_assets.engine.layout import AUX_OUTPUTS
from fm_assets.engine.records import StageSuccess
from fm_assets.engine.refs import read_ref, read_success_at
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import ALL_STAGE_NAMES, CHAIN_NAMES

COST_FIELDS = ("cpu_seconds", "bytes_read", "bytes_written", "bytes_stored", "tokens")
LABELS = ("namespace", "source", "team")
UNASSIGNED = "unassigned"
# tokens are counted once per chain, at its last stage (tokenize, pack and shard each hold the same tokens)
FINAL_STAGES = frozenset(names[-1] for names in CHAIN_NAMES.values())


def tokens_produced(success: StageSuccess) -> int:
    """Tokens a stage's output holds (tokenize, pack: summed unit metrics; shard: its manifest); 0 before."""
    return int(success.extra.get("tokens") or success.artifacts.get("tokens") or 0)


def cost_rows(
    store: ObjectStore,
    batches: Iterable[str] | None = None,
    teams: Mapping[str, str] | None = None,
    chains: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """One row per batch and stage (of ``chains``, default every chain) with a current output: its chain,
    labels and what it cost."""
    teams = teams or {}
    chains = list(CHAIN_NAMES) if chains is None else list(chains)
    unknown = [chain for chain in chains if chain not in CHAIN_NAMES]
    if unknown:
        raise ValueError(f"unknown chain {unknown[0]!r}; chains are {', '.join(CHAIN_NAMES)}")
    stages = [(chain, stage) for chain in chains for stage in CHAIN_NAMES[chain]]
    rows = []
    for batch in batches or list_complete_batches(store):
        manifest = read_batch_manifest(store, batch)
        labels = {
            "namespace": manifest.namespace,
            "source": manifest.source,
            "team": teams.get(manifest.source, UNASSIGNED),
        }
        for chain, stage in stages:
            ref = read_ref(store, stage, batch)
            if ref is None:
                continue
            success = read_success_at(store, ref.prefix)
            cost = with_aux_cost(store, success)
            rows.append(
                {
                    "batch": batch,
                    "chain": chain,
                    "stage": stage,
                    **labels,
                    "cpu_seconds": float(cost.get("cpu_seconds", 0.0)),
                    "bytes_read": int(cost.get("bytes_read", 0)),
                    "bytes_written": int(cost.get("bytes_written", 0)),
                    "bytes_stored": int(cost.get("bytes_stored", 0)),
                    "tokens": tokens_produced(success),
                    "metered": bool(cost),
                }
            )
    return rows


def with_aux_cost(store: ObjectStore, success: StageSuccess) -> dict[str, Any]:
    """The output's metered cost plus that of the auxiliary outputs it lists (units it ran before its own)."""
    cost = dict(success.cost)
    for prefix in success.artifacts.get(AUX_OUTPUTS) or []:
        aux = read_success_at(store, prefix).cost
        for name in ("cpu_seconds", "bytes_read", "bytes_written", "bytes_stored"):
            cost[name] = cost.get(name, 0) + aux.get(name, 0)
    return cost


def cost_by(rows: Iterable[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """Rows summed per (``label`` value, stage), in label then chain then stage order."""
    if label not in LABELS:
        raise ValueError(f"cost label {label!r} is not one of {', '.join(LABELS)}")
    totals: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: dict.fromkeys(COST_FIELDS, 0))
    for row in rows:
        entry = totals[(row[label], row["stage"])]
        for name in COST_FIELDS:
            entry[name] += row[name]
    order = {stage: i for i, stage in enumerate(ALL_STAGE_NAMES)}
    chain_of = {stage: chain for chain, names in CHAIN_NAMES.items() for stage in names}
    return [
        {
            label: value,
            "chain": chain_of[stage],
            "stage": stage,
            **{k: round(v, 4) if isinstance(v, float) else v for k, v in entry.items()},
        }
        for (value, stage), entry in sorted(totals.items(), key=lambda kv: (kv[0][0], order[kv[0][1]]))
    ]


def cost_totals(rows: Iterable[dict[str, Any]], label: str) -> list[dict[str, Any]]:
    """Rows summed per ``label`` value over every stage; ``tokens`` is what the shards hold (tokenize, pack
    and shard each count the same tokens, so only each chain's last stage counts them)."""
    totals: dict[str, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(COST_FIELDS, 0))
    for row in rows:
        for name in COST_FIELDS:
            if name != "tokens" or row["stage"] in FINAL_STAGES:
                totals[row[label]][name] += row[name]
    return [
        {label: value, **{k: round(v, 4) if isinstance(v, float) else v for k, v in entry.items()}}
        for value, entry in sorted(totals.items())
    ]
