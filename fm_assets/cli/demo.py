"""``fm demo``: real public text -> three landing batches -> every stage -> shards read back and decoded."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from fm_assets.cli.runner import run_batches
from fm_assets.cli.tables import print_summary
from fm_assets.engine import layout
from fm_assets.engine.landing import land_batch, list_complete_batches, read_batch_manifest
from fm_assets.engine.store import ObjectStore
from fm_assets.reports.report import build_report
from fm_assets.settings import Settings
from fm_assets.side_inputs.tokenizer import pinned_tokenizer


def _ensure_sample(root: Path, max_docs: int, console: Console) -> dict:
    from fm_assets.sample_data import fetch_sample_data

    sample = root / "sample_data"
    summary_file = sample / "summary.json"
    if summary_file.exists():
        return json.loads(summary_file.read_text())
    console.print(f"fetching real public text into {sample} ...")
    summary = fetch_sample_data(sample, max_docs=max_docs)
    summary_file.write_text(json.dumps(summary, indent=2))
    return summary


def _ensure_batches(store: ObjectStore, sample: dict, console: Console) -> list[str]:
    landed = {read_batch_manifest(store, b).source: b for b in list_complete_batches(store)}
    batches = []
    for package, info in sorted(sample["packages"].items()):
        if package in landed:
            batches.append(landed[package])
            continue
        manifest = land_batch(
            store,
            Path(sample["dest"]) / package,
            source=package,
            license_id=info["license"],
            namespace="cloud",
        )
        console.print(f"landed {package} ({info['docs']} docs) as batch {manifest.batch}")
        batches.append(manifest.batch)
    return batches


def run_demo(settings: Settings, *, max_docs: int, console: Console, out: Console) -> int:
    from fm_loader import Loader, read_rows

    if settings.is_remote:
        console.print("[red]fm demo needs a local --root (it downloads sample data into it)[/red]")
        return 2
    root = Path(settings.root)
    store = ObjectStore(str(root))
    sample = _ensure_sample(root, max_docs, console)
    batches = _ensure_batches(store, sample, console)
    failures = run_batches(settings, batches, console=console)
    if failures:
        for batch, message in failures.items():
            console.print(f"[red]{batch}: {message}[/red]")
        return 1
    rows = build_report(store, batches)
    console.print(
        f"{len(rows)} stage reports; `fm report` shows them, `fm rejects BATCH` lists what was dropped"
    )

    print_summary(console, store, batches)
    name = settings.dataset_name
    latest = store.read_json(layout.dataset_latest(name))["version"]
    manifest_path = store.uri(layout.dataset_manifest(name, latest))
    tokenizer = pinned_tokenizer(store).tokenizer
    out.print(f"\n[bold]dataset {name} version {latest}[/bold]: {manifest_path}")
    for row, shard, index in read_rows(manifest_path, limit=3):
        first_doc = row.tokens[: row.doc_lens[0]]
        text = tokenizer.decode([int(t) for t in first_doc[:80]])
        out.print(
            f"[cyan]{shard} row {index}[/cyan]: {len(row.tokens)} tokens, {len(row.doc_lens)} docs; "
            f"first doc {row.doc_ids[0] if row.doc_ids else '?'}: {text!r}"
        )
    loader = Loader(manifest_path, global_batch_size=8, rank=0, world_size=1, seed=0)
    batch = next(iter(loader))
    shapes = {key: tuple(value.shape) for key, value in batch.items()}
    out.print(f"fm_loader batch shapes: {shapes}")
    return 0
