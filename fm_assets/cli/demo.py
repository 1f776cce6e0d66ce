"""``fm demo``: real public text (and, unless ``--no-media``, images, audio and videos) -> landing batches ->
every stage of both chains -> shards read back and decoded, one ``fm_loader`` batch of each kind (the last
one a video-text batch of keyframes)."""

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

DEMO_VIDEOS_PER_PACKAGE = 4  # languages of the same video are exact duplicates: a few show the dedup


def _ensure_sample(root: Path, max_docs: int, console: Console, *, progress: bool) -> dict:
    from fm_assets.sample_data import fetch_sample_data

    sample = root / "sample_data"
    summary_file = sample / "summary.json"
    if summary_file.exists():
        return json.loads(summary_file.read_text())
    console.print(f"fetching real public text into {sample} ...")
    summary = fetch_sample_data(sample, max_docs=max_docs, progress=progress)  # bars only on a terminal
    summary_file.write_text(json.dumps(summary, indent=2))
    return summary


def _ensure_media_sample(root: Path, max_samples: int, console: Console) -> dict:
    """The handbook figures and the English Asterisk prompts (``max_samples`` of each) and a few GNOME help
    videos per package (``DEMO_VIDEOS_PER_PACKAGE``); no packages: none."""
    from fm_assets.sample_data.media import fetch_media_sample_data
    from fm_assets.sample_data.media_sample import AUDIO, IMAGE, VIDEO

    sample = root / "sample_media"
    summary_file = sample / "summary.json"
    if summary_file.exists():
        return json.loads(summary_file.read_text())
    console.print(f"fetching real public images, audio and videos into {sample} ...")
    summary = fetch_media_sample_data(
        sample, modalities=(IMAGE, AUDIO), max_samples=max_samples, audio_languages=("en",)
    )
    videos = fetch_media_sample_data(sample, modalities=(VIDEO,), max_samples=DEMO_VIDEOS_PER_PACKAGE)
    summary["packages"].update(videos["packages"])
    summary["errors"] += videos["errors"]
    summary["total_samples"] += videos["total_samples"]
    for error in summary["errors"]:
        console.print(f"[yellow]media sample data: {error}[/yellow]")
    sample.mkdir(parents=True, exist_ok=True)
    summary_file.write_text(json.dumps(summary, indent=2))
    return summary


def _ensure_batches(store: ObjectStore, sample: dict, console: Console) -> list[str]:
    landed = {read_batch_manifest(store, b).source: b for b in list_complete_batches(store)}
    batches = []
    for package, info in sorted(sample["packages"].items()):
        source = (
            f"{package}-{info['modality']}" if "modality" in info else package
        )  # handbook: text and image
        if source in landed:
            batches.append(landed[source])
            continue
        manifest = land_batch(
            store,
            Path(info["folder"]) if "folder" in info else Path(sample["dest"]) / package,
            source=source,
            license_id=info["license"],
            namespace="cloud",
        )
        what = f"{info['docs']} docs" if "docs" in info else f"{info['samples']} {info['modality']} samples"
        console.print(f"landed {package} ({what}) as batch {manifest.batch}")
        batches.append(manifest.batch)
    return batches


def _show_media(store: ObjectStore, name: str, out: Console) -> None:
    """One ``MediaLoader`` batch of each released media dataset."""
    from fm_assets.compliance.namespaces import MODALITIES, media_dataset_name
    from fm_loader.media.loader import MediaLoader

    for modality in sorted(MODALITIES):
        dataset = media_dataset_name(name, modality, "cloud")
        if not store.exists(layout.dataset_latest(dataset)):
            continue
        version = store.read_json(layout.dataset_latest(dataset))["version"]
        manifest_path = store.uri(layout.dataset_manifest(dataset, version))
        with MediaLoader(manifest_path, global_batch_size=4, seed=0) as loader:
            batch = next(iter(loader))
        shapes = {key: tuple(v.shape) for key, v in batch.items() if hasattr(v, "shape")}
        out.print(f"[bold]dataset {dataset} version {version}[/bold]: {manifest_path}")
        out.print(f"fm_loader.media {modality} batch shapes: {shapes}; text[0]: {batch['text'][0][:80]!r}")


def run_demo(
    settings: Settings, *, max_docs: int, console: Console, out: Console, media_samples: int = 0
) -> int:
    from fm_loader import Loader, read_rows

    if settings.is_remote:
        console.print("[red]fm demo needs a local --root (it downloads sample data into it)[/red]")
        return 2
    root = Path(settings.root)
    store = ObjectStore(str(root))
    sample = _ensure_sample(root, max_docs, console, progress=settings.progress)
    batches = _ensure_batches(store, sample, console)
    if media_samples:  # after the text batches: the tokenizer trains on their documents, not captions
        batches += _ensure_batches(store, _ensure_media_sample(root, media_samples, console), console)
    failures = run_batches(settings, batches, console=console)
    if failures:
        for batch, message in failures.items():
            console.print(f"[red]{batch}: {message}[/red]")
        return 1
    rows = build_report(store, batches)
    console.print(
        f"{len(rows)} stage reports; `fm report` shows them, `fm rejects BATCH` lists what was dropped"
    )

    print_summary(out, store, batches)
    name = settings.dataset_name
    latest = store.read_json(layout.dataset_latest(name))["version"]
    manifest_path = store.uri(layout.dataset_manifest(name, latest))
    tokenizer = pinned_tokenizer(store).tokenizer
    out.print()  # a blank line first: the style tag only applies at the start of the line (pipes.literal)
    out.print(f"[bold]dataset {name} version {latest}[/bold]: {manifest_path}")
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
    if media_samples:
        _show_media(store, name, out)
    return 0
