"""``fm trace``: from a training step (or a loader sample id, or a doc id) back to the landed bytes and licence.

``fm trace --manifest M --step S --rank R --row I --global-batch-size G --world-size W --seed N`` (or
``--run RUN``: the seed, world size, batch size and manifest come from that run's read receipt) prints, for
each document packed into that row (or the media sample): doc id, landed file and record index, CAS hash,
batch, source, licence, namespace, what each stage did with it and the dataset versions holding it.
``--sample-id`` takes a loader ``sample_ids`` value, ``--doc-id`` a doc id; ``--json`` prints it for tools.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console

from fm_assets.engine.store import ObjectStore
from fm_assets.reports import trace
from fm_loader.receipts import read_receipts


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "trace", help="from a training step, sample id or doc id back to its landed file and licence"
    )
    p.add_argument("--manifest", help="the dataset manifest the trainer read (path or URI)")
    p.add_argument(
        "--run", help="a training run with read receipts: its manifest, seed, world size, batch size"
    )
    p.add_argument("--step", type=int, help="global step (global batches from the start of epoch 0)")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--row", type=int, help="row (sample) of that rank's batch")
    p.add_argument("--global-batch-size", type=int)
    p.add_argument("--world-size", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--sample-id", type=int, help="a value of the batch's sample_ids")
    p.add_argument("--doc-id", help="a document or media sample id")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def _from_run(store: ObjectStore, args: argparse.Namespace) -> None:
    """Fill the loader settings the command line left out from the run's receipt (rank ``--rank``)."""
    records = [r for r in read_receipts(store.root, store.storage_options or None) if r["run_id"] == args.run]
    if not records:
        raise trace.TraceError(f"no read receipt of run {args.run!r} under {store.root}/receipts")
    record = next((r for r in records if r.get("rank") == args.rank), records[0])
    datasets = record.get("datasets") or []
    if args.manifest is None:
        if len(datasets) != 1:
            raise trace.TraceError(f"run {args.run} read {len(datasets)} datasets: name one with --manifest")
        args.manifest = datasets[0]["manifest"]
    for key in ("global_batch_size", "world_size", "seed"):
        if getattr(args, key) is None:
            setattr(args, key, record[key])


def run(args: argparse.Namespace, store: ObjectStore, console: Console, out: Console) -> int:
    started = time.perf_counter()
    try:
        if args.run:
            _from_run(store, args)
        result: dict[str, Any] = {}
        if args.doc_id:
            ids, batch, where = [args.doc_id], None, {}
        else:
            if not args.manifest:
                raise trace.TraceError(
                    "name the data: --manifest (or --run), with --step/--row or --sample-id"
                )
            options = store.storage_options or None
            if args.sample_id is not None:
                located = trace.locate_sample_id(args.manifest, args.sample_id, options)
            else:
                missing = [
                    k
                    for k in ("step", "row", "global_batch_size", "world_size", "seed")
                    if getattr(args, k) is None
                ]
                if missing:
                    raise trace.TraceError(
                        "--step/--row need "
                        + ", ".join("--" + k.replace("_", "-") for k in missing)
                        + " (or --run)"
                    )
                located = trace.locate(
                    args.manifest,
                    step=args.step,
                    rank=args.rank,
                    row=args.row,
                    global_batch_size=args.global_batch_size,
                    world_size=args.world_size,
                    seed=args.seed,
                    storage_options=options,
                )
            shard, batch, ids = trace.documents_in_row(store, located)
            where = {
                "shard": shard,
                "row_in_shard": located.row,
                "epoch": located.epoch,
                "position": located.position,
            }
        result = {**where, "documents": [trace.provenance(store, doc_id, batch) for doc_id in ids]}
    except trace.TraceError as exc:
        console.print(f"[red]fm trace: {exc}[/red]", highlight=False)
        return 2
    result["seconds"] = round(time.perf_counter() - started, 3)
    if args.json:
        out.print_json(json.dumps(result, default=str))
        return 0
    if "shard" in result:
        out.print(
            f"shard {result['shard']} row {result['row_in_shard']}"
            + (
                f" (epoch {result['epoch']}, stream position {result['position']})"
                if result["epoch"] is not None
                else ""
            ),
            highlight=False,
        )
    for doc in result["documents"]:
        out.print(
            f"{doc['doc_id']}: {doc['landed_file']} "
            + (f"line {doc['line']}" if doc["line"] else f"record {doc['record_index']}")
            + f" (cas {doc['cas_hash'][:16]}) "
            f"batch {doc['batch']} source {doc['source']} licence {doc['license']} namespace {doc['namespace']}",
            highlight=False,
        )
        stages = ", ".join(
            s["stage"] + (f" rejected ({s['reason']})" if s["outcome"] == "rejected" else f" {s['outcome']}")
            for s in doc["stages"]
        )
        out.print(f"  stages: {stages}", highlight=False)
        versions = ", ".join(
            f"{v['dataset']} {v['version']}" + (" (revoked)" if v["revoked"] else "")
            for v in doc["dataset_versions"]
        )
        out.print(f"  in: {versions or 'no dataset version'}", highlight=False)
    return 0
