"""``fm card VERSION``: print a released dataset version's card (Markdown, or ``--json``), or open it.

Every release has ``card.json``; text releases also ``card.md``. A media release (image-, audio-,
video-text) has ``card.json`` only, so its card prints as JSON (a note on stderr says so)."""

from __future__ import annotations

import argparse
import posixpath
import webbrowser

from rich.console import Console

from fm_assets.datasets.card import CARD_MD
from fm_assets.engine import layout
from fm_assets.engine.store import ObjectStore


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("card", help="print (or --open) the dataset card of a released version")
    p.add_argument(
        "version", help="the version id, or a unique prefix of it ('latest': the newest of --name)"
    )
    p.add_argument("--name", help="dataset name (default: any dataset holding that version)")
    p.add_argument("--json", action="store_true", help="card.json instead of card.md")
    p.add_argument("--open", action="store_true", help="open card.md in a browser (local roots)")


CARD_JSON = posixpath.basename(layout.dataset_card("d", "v"))


def find_versions(store: ObjectStore, version: str, name: str | None) -> list[tuple[str, str]]:
    """(dataset, version) pairs whose card (``card.json``, every release has one) matches ``version`` (a
    prefix) and ``name``."""
    if version == "latest":
        if not name:
            return []
        rel = layout.dataset_latest(name)
        return [(name, store.read_json(rel)["version"])] if store.exists(rel) else []
    found = set()
    for path in store.sizes_under("datasets"):
        parts = path.split("/")
        if (
            len(parts) == 3
            and parts[2] == CARD_JSON
            and parts[1].startswith(version)
            and name in (None, parts[0])
        ):
            found.add((parts[0], parts[1]))
    return sorted(found)


def run(args: argparse.Namespace, store: ObjectStore, console: Console, out: Console) -> int:
    matches = find_versions(store, args.version, args.name)
    if len(matches) != 1:
        what = (
            "no dataset card"
            if not matches
            else f"{len(matches)} cards ({', '.join('/'.join(m) for m in matches)})"
        )
        console.print(
            f"[red]fm card: {what} match version {args.version!r}; `ls {store.uri('datasets')}`[/red]"
        )
        return 2
    name, version = matches[0]
    folder = layout.dataset_dir(name, version)
    has_md = store.exists(f"{folder}/{CARD_MD}")
    if not has_md and not args.json:
        if args.open:
            console.print(f"[red]fm card --open: {name} {version} has no {CARD_MD}; fm card --json[/red]")
            return 2
        console.print(
            f"[yellow]{name} {version} has no {CARD_MD} (a media release): its {CARD_JSON}[/yellow]"
        )
    if args.open:
        if not store.is_local:
            console.print(
                f"[red]fm card --open needs a local root; the card is {store.uri(folder)}/{CARD_MD}[/red]"
            )
            return 2
        webbrowser.open(store.local_path(f"{folder}/{CARD_MD}").as_uri())
        out.print(store.local_path(f"{folder}/{CARD_MD}"), highlight=False)
        return 0
    if args.json or not has_md:
        out.print_json(store.read_bytes(layout.dataset_card(name, version)).decode("utf-8"))
    else:
        out.print(store.read_bytes(f"{folder}/{CARD_MD}").decode("utf-8"), markup=False, highlight=False)
    return 0
