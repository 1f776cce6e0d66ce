"""Which chains a landed batch feeds, from its files (what the sensor, `fm run`, the releases and the
cross-batch waits use), and a later text batch never waits for a media-only batch's text output."""

from __future__ import annotations

from pathlib import Path

from media_fixtures import png_image

from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import pending_earlier
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.batch_chains import batch_chains


def _land(store: ObjectStore, folder: Path, files: dict[str, bytes]) -> str:
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return land_batch(store, folder, source="s", license_id="MIT", namespace="cloud").batch


def test_chains_follow_the_landed_files(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path / "root"))
    media = _land(store, tmp_path / "m", {"cat.png": png_image(), "cat.txt": b"a cat on a mat"})
    text = _land(store, tmp_path / "t", {"docs.jsonl": b'{"text": "hello world"}\n'})
    mixed = _land(store, tmp_path / "x", {"dog.png": png_image(seed=1), "notes.md": b"# notes\n\nsome text"})
    assert batch_chains(store, media) == ("media",)  # the caption is the image's, not a document
    assert batch_chains(store, text) == ("text",)
    assert batch_chains(store, mixed) == ("text", "media")
    # text stages of the later batches wait for the earlier text batch only, never for the media batch
    assert media < text < mixed
    assert pending_earlier(store, "dedup", mixed) == [text]
    assert pending_earlier(store, "media_dedup", mixed) == [media]
