"""`fm run`'s held-back list covers every release of the dataset, media releases too: a media batch held back
from `<name>-image-text` makes the run exit non-zero like a text batch held back from `<name>`."""

from __future__ import annotations

from fm_assets.datasets.release import latest_held_back
from fm_assets.engine import layout
from fm_assets.engine.store import ObjectStore


def release(store: ObjectStore, dataset: str, version: str, held_back: list[dict[str, str]]) -> None:
    store.write_json(layout.dataset_card(dataset, version), {"held_back": held_back})
    store.write_json(layout.dataset_latest(dataset), {"version": version})


def test_held_back_batches_of_text_and_media_releases_are_all_named_once(tmp_path) -> None:
    store = ObjectStore(str(tmp_path / "root"))
    text = {"batch": "b-text", "reason": "pack's check packing_efficiency failed"}
    media = {"batch": "b-media", "reason": "licence GPL-3.0-only is not allowed in namespace cloud"}
    release(store, "fm", "v1", [text])
    release(store, "fm-on_device", "v1", [text])  # the same batch named by two releases: once
    release(store, "fm-image-text", "v7", [media])
    release(store, "fm-image-text", "v6", [{"batch": "b-old", "reason": "an older version's"}])
    store.write_json(layout.dataset_latest("fm-image-text"), {"version": "v7"})  # v6 is not the latest
    release(store, "other-image-text", "v1", [{"batch": "b-other", "reason": "another dataset's"}])

    assert latest_held_back(store, "fm") == [text, media]
    assert latest_held_back(store, "none") == []
