"""``fm quality-model train|register|show``: the explicit step that trains or registers the quality model and
pins it by sha256 (the filter stage only reads the pin)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.quality_model import (
    QualityModelError,
    load_model_file,
    pinned_quality_model,
    register_model,
    train_from_folder,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "quality-model",
        help="train or register the quality model and pin it (filter uses it)",
    )
    actions = parser.add_subparsers(dest="quality_action", required=True)
    p = actions.add_parser("train", help="train on `fm sample-data` pages vs damaged copies, then pin")
    p.add_argument("--data", required=True, help="folder of `fm sample-data` JSONL")
    p.add_argument("--max-docs", type=int, default=4000)
    p.add_argument("--out", help="also write the model file here")
    p = actions.add_parser("register", help="pin an existing model file (.npz)")
    p.add_argument("file")
    actions.add_parser("show", help="the pinned model: sha256, origin, thresholds, training summary")


def run(args: argparse.Namespace, store: ObjectStore, console: Console, out: Console) -> int:
    try:
        if args.quality_action == "train":
            model = train_from_folder(args.data, max_docs=args.max_docs)
            data = model.to_bytes()
            if args.out:
                Path(args.out).write_bytes(data)
            pinned = register_model(store, data, f"trained:{args.data}")
        elif args.quality_action == "register":
            pinned = register_model(store, load_model_file(args.file).to_bytes(), f"file:{args.file}")
        else:
            found = pinned_quality_model(store)
            if found is None:
                console.print("no quality model pinned (`fm quality-model train --data DIR`)")
                return 1
            pinned = found
    except (QualityModelError, OSError, ValueError) as exc:
        console.print(f"[red]fm quality-model: {exc}[/red]")
        return 2
    summary = {
        "sha256": pinned.sha256,
        "origin": pinned.origin,
        "thresholds": pinned.model.thresholds(),
        "trained_on": pinned.model.trained_on,
    }
    out.print_json(json.dumps(summary))
    return 0
