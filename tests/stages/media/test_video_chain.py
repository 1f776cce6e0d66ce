"""Video through the media chain without Dagster: landing in folders, a WebDataset tar and a media JSONL,
probe rejects with measured values, clips and keyframes, clip filters, exact and near dedup within and
across batches, video-text shards with clip provenance, and reproducible bytes."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pyarrow.parquet as pq
import pytest
from video_fixtures import black_video, clip_video, encode_video, moving_frames

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.tokenizer import TokenizerRegistry
from fm_assets.stages.registry import MEDIA_STAGES
from fm_loader.kinds import read_manifest
from fm_loader.media.index import decode_media_index
from fm_loader.media.verify import verify_media_dataset


@pytest.fixture
def settings():
    return PipelineConfigResource(progress=False, rows_per_shard=8, land_unit_bytes=200_000)


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_videos(folder):
    """3 good videos (one 17 s: two 8 s clips), an exact copy, a re-encoded resized copy, a static and a
    black video, a truncated mp4, a video-less file; in folders, a WebDataset tar and a media JSONL."""
    videos = folder / "videos"
    videos.mkdir(parents=True)
    street = clip_video(17.0, width=96, height=64, fps=5, seed=1)
    good = {
        "street.mp4": street,
        "river.webm": clip_video(9.0, width=64, height=96, fps=5, seed=2, container="webm", codec="libvpx"),
        "copy.mkv": street,  # exact duplicate bytes (another extension does not matter)
        "static.mov": clip_video(9.0, fps=5, seed=3, static=True),
        "black.mp4": black_video(9.0, fps=5),
        "cut.mp4": clip_video(9.0, fps=5, seed=4)[:1500],
    }
    for name, data in good.items():
        (videos / name).write_bytes(data)
        (videos / name).with_suffix(".txt").write_text(f"A clip called {name.split('.')[0]}.")
    (videos / "street.txt").write_text("Cars pass along a street at noon.")
    (folder / "clips.tar").write_bytes(
        _tar(
            [
                ("0001.webm", clip_video(9.0, fps=5, seed=5, container="webm", codec="libvpx")),
                ("0001.json", json.dumps({"caption": "Leaves move in the wind."}).encode()),
            ]
        )
    )
    (folder / "lake.mp4").write_bytes(clip_video(9.0, width=80, height=48, fps=5, seed=6))
    (folder / "index.media.jsonl").write_text(json.dumps({"video": "lake.mp4", "caption": "A lake."}) + "\n")
    return folder


def shard_members(manifest):
    """(member name, bytes) of every member of every shard of a release."""
    out = []
    for shard in manifest.shards:
        with tarfile.open(manifest.shard_uri(shard)) as tar:
            for member in tar.getmembers():
                handle = tar.extractfile(member)
                out.append((member.name, handle.read() if handle else b""))
    return out


def pin_tokenizer(store):
    registry = TokenizerRegistry(store)
    registry.pin(registry.train_bpe(["cars pass along a street", "a lake"] * 20, vocab_size=300), origin="t")


def run_chain(store, batch, settings):
    return {
        stage.name: materialize(stage, StageContext(store, batch, settings, {})).outcome
        for stage in MEDIA_STAGES
    }


def rejects(store, outcome):
    rows = []
    for rel in outcome.success.rejects:
        with store.open(rel) as handle:
            rows += pq.read_table(handle).to_pylist()
    return {
        json.loads(r["details"]).get("origin", r["doc_id"]): (r["reason"], json.loads(r["details"]))
        for r in rows
    }


def test_video_chain(tmp_path, settings):
    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    batch = land_batch(
        store, write_videos(tmp_path / "one"), source="gen", license_id="CC-BY-4.0", namespace="cloud"
    ).batch
    outcomes = run_chain(store, batch, settings)
    for name, outcome in outcomes.items():
        counts = outcome.success.counts
        assert counts.records_in == counts.records_out + counts.records_rejected, name

    assert outcomes["media_land"].success.counts.records_out == 8
    validate = outcomes["media_validate"].success
    assert validate.rejects_by_reason == {"truncated_video": 1}
    clip = outcomes["media_clip"].success
    assert clip.extra["clips"] == 2 + 1 + 2 + 1 + 1 + 1 + 1  # street 17 s and its copy: 2 clips each
    assert clip.counts.rows_written == 9
    filtered = outcomes["media_filter"].success.rejects_by_reason
    assert filtered == {"static_clip": 1, "blank_frames": 1}, filtered
    dedup = outcomes["media_dedup"].success.rejects_by_reason
    assert dedup == {"exact_duplicate": 2}  # both clips of street.mp4 (copy.mkv is first in path order)

    manifest = read_manifest(
        store.local_path(outcomes["media_shard"].success.artifacts["manifests"]["video"])
    )
    assert manifest.kind == "video-text" and manifest.samples == 5
    assert verify_media_dataset(manifest).ok
    metas = [json.loads(data) for name, data in shard_members(manifest) if name.endswith(".json")]
    street = [m for m in metas if m["provenance"]["origin"] == "videos/copy.mkv"]
    assert [m["provenance"]["clip"]["start_s"] for m in street] == [0.0, 8.0]
    assert {m["keyframes"] for m in metas} == {4}
    assert all(m["provenance"]["cas_hash"] and m["caption_tokens"] for m in metas)
    (shard,) = manifest.shards
    with open(manifest.index_uri(shard), "rb") as handle:
        index = decode_media_index(handle.read())
    assert set(index.records["frames"].tolist()) == {4} and index.records["height"].min() == 128


@pytest.mark.slow
def test_video_near_and_exact_duplicates_across_batches(tmp_path, settings):
    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    frames = moving_frames(96, 64, 45, seed=7)
    original = encode_video(frames, fps=5)
    first_dir = tmp_path / "one"
    first_dir.mkdir()
    (first_dir / "a.mp4").write_bytes(original)
    (first_dir / "a.txt").write_text("A moving pattern.")
    first = land_batch(store, first_dir, source="gen", license_id="CC-BY-4.0", namespace="cloud").batch
    run_chain(store, first, settings)

    import numpy as np
    from PIL import Image

    small = [np.asarray(Image.fromarray(f).resize((72, 48))) for f in frames]
    second_dir = tmp_path / "two"
    second_dir.mkdir()
    (second_dir / "resized.webm").write_bytes(encode_video(small, fps=5, container="webm", codec="libvpx"))
    (second_dir / "resized.txt").write_text("The same pattern, smaller.")
    (second_dir / "again.mp4").write_bytes(original)
    (second_dir / "again.txt").write_text("The very same file.")
    (second_dir / "other.mp4").write_bytes(encode_video(moving_frames(96, 64, 45, seed=8), fps=5))
    (second_dir / "other.txt").write_text("Another pattern: never paired with the first.")
    second = land_batch(store, second_dir, source="gen", license_id="CC-BY-4.0", namespace="cloud").batch
    outcomes = run_chain(store, second, settings)
    assert outcomes["media_dedup"].success.rejects_by_reason == {"exact_duplicate_cross_batch": 1}
    near = rejects(store, outcomes["media_near_dedup"])
    ((reason, details),) = near.values()
    assert reason == "near_duplicate" and details["survivor_batch"] == first
    assert details["survivor_id"].endswith("@c000") and details["hamming_distance"] <= details["max_distance"]
    # every keyframe is compared: the distance is the mean of the four aligned keyframes' distances
    frames = details["keyframe_distances"]
    assert len(frames) == 4 and details["hamming_distance"] == round(sum(frames) / 4, 4)
    assert details["distance_rule"] == "mean over aligned keyframes"
    with store.open(outcomes["media_near_dedup"].success.artifacts["phash_index"]) as handle:
        index = pq.read_table(handle).to_pylist()
    (kept,) = index  # other.mp4's clip: kept, with every keyframe's hash for later batches
    assert kept["modality"] == "video" and len(kept["phashes"]) == 4 and kept["phash"] == kept["phashes"][2]


@pytest.mark.slow
def test_video_shards_are_reproducible(tmp_path, settings):
    shas = []
    for run in ("a", "b"):
        store = ObjectStore(str(tmp_path / run))
        pin_tokenizer(store)
        folder = tmp_path / f"in-{run}"
        folder.mkdir()
        (folder / "v.webm").write_bytes(clip_video(9.0, fps=5, seed=9, container="webm", codec="libvpx"))
        (folder / "v.txt").write_text("Reproducible.")
        batch = land_batch(store, folder, source="gen", license_id="CC-BY-4.0", namespace="cloud").batch
        outcomes = run_chain(store, batch, settings)
        manifest = read_manifest(
            store.local_path(outcomes["media_shard"].success.artifacts["manifests"]["video"])
        )
        shas.append([data for name, data in shard_members(manifest) if name.endswith(".strip.jpg")])
    assert shas[0] == shas[1] and shas[0]


def test_a_source_revocation_reaches_the_video_clips_in_the_shards(tmp_path, settings):
    from fm_assets.compliance.blast_radius import ShardRows, affected_documents
    from fm_assets.compliance.revocations import Revocation

    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "v.mp4").write_bytes(clip_video(17.0, fps=5, seed=11))
    (folder / "v.txt").write_text("Two clips of one video.")
    batch = land_batch(store, folder, source="gen", license_id="CC-BY-4.0", namespace="cloud").batch
    shard = run_chain(store, batch, settings)["media_shard"].success
    revocation = Revocation("r1", "2026-01-01T00:00:00Z", "test", "me", source="gen", license="*")
    affected = affected_documents(store, revocation)
    (video_id,) = affected.doc_ids
    manifest = read_manifest(store.local_path(shard.artifacts["manifests"]["video"]))
    (entry,) = manifest.shards
    assert ShardRows(store).docs(f"{shard.prefix}/{entry.path}") == {video_id}  # both clips map to it
    other = Revocation("r2", "2026-01-01T00:00:00Z", "test", "me", source="elsewhere", license="*")
    assert not affected_documents(store, other).doc_ids


def test_the_videos_lance_view_has_a_row_and_a_thumbnail_per_released_clip(tmp_path, settings, capsys):
    import lance
    from PIL import Image

    from fm_assets.compliance.namespaces import media_lance_uris
    from fm_assets.datasets.media_views import THUMBNAIL_SIDE, write_media_lance

    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "v.mp4").write_bytes(clip_video(17.0, width=96, height=64, fps=5, seed=12))
    (folder / "v.txt").write_text("Two clips.")
    batch = land_batch(store, folder, source="gen", license_id="CC-BY-4.0", namespace="cloud").batch
    run_chain(store, batch, settings)
    uris = media_lance_uris(str(tmp_path / "lance" / "documents.lance"))
    result = write_media_lance(store, uris)
    assert (result["video"]["rows"], result["image"]["rows"], result["audio"]["rows"]) == (2, 0, 0)
    rows = lance.dataset(uris["video"]).to_table().to_pylist()
    assert [(r["clip_start_s"], r["clip_end_s"], r["keyframes"]) for r in rows] == [
        (0.0, 8.0, 4),
        (8.0, 16.0, 4),
    ]
    thumb = Image.open(io.BytesIO(rows[0]["thumbnail"]))
    assert thumb.format == "JPEG" and max(thumb.size) == THUMBNAIL_SIDE and thumb.size[0] > thumb.size[1]
    assert rows[0]["caption"] == "Two clips." and rows[0]["width"] == 96
    assert [(r["has_clip"], r["clip_bytes"], r["clip_sha256"]) for r in rows] == [(False, None, None)] * 2
    card = video_release_card(store)
    assert card["video"] == {
        "clips": 2,
        "clip_seconds": 16.0,
        "keyframes_per_clip": [4],
        "stored_clips": 0,
        "stored_clip_bytes": 0,
    }
    # `fm card` finds the media release by a version prefix and prints its card.json (it has no card.md)
    from fm_assets.cli.main import main

    capsys.readouterr()
    assert main(["--root", store.root, "card", card["version"][:8]]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["video"] == card["video"] and "no card.md" in printed.err
    assert main(["--root", store.root, "card", card["version"][:8], "--open"]) == 2


def video_release_card(store):
    """card.json of the video-text release ``assemble_media_release`` writes for ``store``'s batches."""
    from fm_assets.datasets.media_release import assemble_media_release
    from fm_assets.engine import layout

    released = assemble_media_release(store, "t")["released"]
    [video] = [r for r in released if r["dataset"].startswith("t-video-text")]
    return store.read_json(layout.dataset_card(video["dataset"], video["version"]))


def test_a_still_equal_to_a_keyframe_is_not_a_near_duplicate_of_the_clip(tmp_path, settings):
    from PIL import Image

    from fm_assets.transforms.image.phash import hamming, phash64

    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    frames = moving_frames(96, 64, 45, seed=13)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "v.mp4").write_bytes(encode_video(frames, fps=5))
    (folder / "v.txt").write_text("A clip.")
    still = Image.fromarray(frames[25]).resize((192, 128))  # the clip's middle keyframe (t = 5 s)
    buffer = io.BytesIO()
    still.save(buffer, format="PNG")
    (folder / "still.png").write_bytes(buffer.getvalue())
    (folder / "still.txt").write_text("A still of the pattern at five seconds.")
    batch = land_batch(store, folder, source="gen", license_id="CC-BY-4.0", namespace="cloud").batch
    outcomes = run_chain(store, batch, settings)
    index_rel = outcomes["media_near_dedup"].success.artifacts["phash_index"]
    with store.open(index_rel) as handle:
        index = pq.read_table(handle).to_pylist()
    clip = next(r for r in index if r["modality"] == "video")
    assert hamming(phash64(still) & (2**64 - 1), clip["phash"] & (2**64 - 1)) <= 8  # close enough to pair
    assert {r["modality"] for r in index} == {"image", "video"}
    assert outcomes["media_near_dedup"].success.rejects_by_reason == {}


@pytest.mark.slow
def test_stored_clips_reach_the_shards_and_the_loader_with_the_same_bytes_on_a_rerun(tmp_path):
    from fm_assets.stages.media_clip import STAGE as MEDIA_CLIP
    from fm_loader import Loader

    stored = PipelineConfigResource(progress=False, rows_per_shard=8, video_store_clips=True)
    plain = PipelineConfigResource(progress=False, rows_per_shard=8)
    tars, manifests = [], []
    video = clip_video(17.0, fps=5, seed=9, container="webm", codec="libvpx")  # one input for both runs
    for run in ("a", "b"):
        store = ObjectStore(str(tmp_path / run))
        pin_tokenizer(store)
        folder = tmp_path / f"in-{run}"
        folder.mkdir()
        (folder / "v.webm").write_bytes(video)
        (folder / "v.txt").write_text("Two clips, stored.")
        batch = land_batch(store, folder, source="gen", license_id="CC-BY-4.0", namespace="cloud").batch
        ctx = StageContext(store, batch, stored, {})
        assert MEDIA_CLIP.config(ctx) != MEDIA_CLIP.config(
            StageContext(store, batch, plain, {})
        )  # in the key
        outcomes = run_chain(store, batch, stored)
        path = store.local_path(outcomes["media_shard"].success.artifacts["manifests"]["video"])
        manifest = read_manifest(path)
        manifests.append((path, manifest))
        tars.append({n: d for n, d in shard_members(manifest) if not n.endswith(".json")})
    assert tars[0] == tars[1]  # byte-identical media, clips included (the .json names each run's batch)
    path, manifest = manifests[0]
    members = dict(shard_members(manifest))
    clips = {name: data for name, data in members.items() if name.endswith(".clip.mp4")}
    assert len(clips) == 2 and all(data[4:8] == b"ftyp" for data in clips.values())
    metas = [json.loads(data) for name, data in members.items() if name.endswith(".json")]
    assert sorted(m["clip"]["bytes"] for m in metas) == sorted(len(d) for d in clips.values())
    assert verify_media_dataset(manifest).ok
    assert manifest.shards[0].shape_summary["clips"] == 2
    got = []
    for batch in Loader(str(path), 2, prefetch=0):
        got += [c for c, v in zip(batch["clips"], batch["valid"].tolist(), strict=True) if v]
    assert sorted(got) == sorted(clips.values())
    # the Lance videos view and the release's card show the stored clips
    import lance

    from fm_assets.compliance.namespaces import media_lance_uris
    from fm_assets.datasets.media_views import write_media_lance

    store = ObjectStore(str(tmp_path / "b"))
    uris = media_lance_uris(str(tmp_path / "lance" / "documents.lance"))
    write_media_lance(store, uris)
    rows = lance.dataset(uris["video"]).to_table().to_pylist()
    by_hash = {hashlib.sha256(d).hexdigest(): len(d) for d in clips.values()}
    assert [r["has_clip"] for r in rows] == [True, True]
    assert {r["clip_sha256"]: r["clip_bytes"] for r in rows} == by_hash
    card = video_release_card(store)["video"]
    assert (card["clips"], card["stored_clips"]) == (2, 2)
    assert card["stored_clip_bytes"] == sum(by_hash.values())


def test_the_clip_settings_are_in_media_clips_key(tmp_path):
    from fm_assets.stages.media_clip import STAGE as MEDIA_CLIP

    store = ObjectStore(str(tmp_path / "root"))

    def clips_config(**settings):
        return MEDIA_CLIP.config(StageContext(store, "b", PipelineConfigResource(**settings), {}))["clips"]

    default, shots, stored = (
        clips_config(),
        clips_config(video_cuts="shots"),
        clips_config(video_store_clips=True),
    )
    assert (default["cuts"], default["store_clip"]) == ("fixed", False)  # both off by default
    assert shots["cuts"] == "shots" and stored["store_clip"] is True
    assert len({json.dumps(c, sort_keys=True) for c in (default, shots, stored)}) == 3
