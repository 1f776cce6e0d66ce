"""The bad-input corpus through land and validate: every broken record rejected with a reason, the rest goes on."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import LandingError, land_batch
from fm_assets.engine.refs import write_ref
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.land import STAGE as LAND
from fm_assets.stages.validate import STAGE as VALIDATE

GOOD = "The quick brown fox jumps over the lazy dog near the river bank today."


def make_corpus(folder):
    folder.mkdir()
    good = [json.dumps({"text": f"{GOOD} {i}"}) for i in range(5)]
    (folder / "good.jsonl").write_text("\n".join(good) + "\n")
    (folder / "mixed.jsonl").write_bytes(
        b'{"text": "fine record here"}\n'
        b'{"text": "broken json\n'
        b'["not", "an", "object"]\n'
        b'{"title": "no text field"}\n'
        b'{"text": "bad \xff\xfe utf8"}\n'
    )
    full = gzip.compress(("\n".join(good * 200) + "\n").encode())
    (folder / "truncated.jsonl.gz").write_bytes(full[: len(full) // 2])
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "page.html").write_text(
        "<html><body><script>x()</script><p>Real paragraph text.</p></body></html>"
    )
    (folder / "notes.bin").write_bytes(b"\x00\x01\x02")


def test_bad_input_is_quarantined_with_reasons(tmp_path):
    make_corpus(tmp_path / "src")
    store = ObjectStore(str(tmp_path / "root"))
    batch = land_batch(store, tmp_path / "src", source="bad", license_id="MIT", namespace="cloud").batch
    settings = PipelineConfigResource(progress=False)
    land = run_stage(LAND, StageContext(store, batch, settings))
    write_ref(store, "land", batch, land.success, cache_hit=False, wall_seconds=0)
    reasons = land.success.rejects_by_reason
    for expected in (
        "malformed_json",
        "wrong_schema",
        "missing_text",
        "invalid_utf8",
        "truncated_archive",
        "empty_file",
    ):
        assert reasons.get(expected, 0) >= 1, (expected, reasons)
    counts = land.success.counts.to_json()
    assert counts["records_in"] == counts["records_out"] + counts["records_rejected"]
    assert (
        counts["records_out"] >= 5 + 1 + 1
    )  # good file, the fine record, the html page (+ what precedes truncation)

    validate = run_stage(VALIDATE, StageContext(store, batch, settings))
    assert validate.success.counts.records_in == counts["records_out"]


def test_batch_without_licence_or_with_unknown_namespace_is_refused(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text('{"text": "x"}\n')
    store = ObjectStore(str(tmp_path / "root"))
    with pytest.raises(LandingError, match="licence"):
        land_batch(store, src, source="s", license_id="", namespace="cloud")
    with pytest.raises(LandingError, match="namespace"):
        land_batch(store, src, source="s", license_id="MIT", namespace="attic")
    assert not store.exists("landing")


def test_hand_made_batch_without_licence_is_rejected_per_record(tmp_path):
    store = ObjectStore(str(tmp_path / "root"))
    payload = b'{"text": "some words here"}\n{"text": "more words"}\n'
    store.write_bytes("landing/manual/files/a.jsonl", payload)
    store.write_json(
        "landing/manual/_batch.json",
        {
            "batch": "manual",
            "source": "s",
            "license": "",
            "namespace": "cloud",
            "files": [
                {"path": "a.jsonl", "sha256": hashlib.sha256(payload).hexdigest(), "bytes": len(payload)}
            ],
        },
    )
    settings = PipelineConfigResource(progress=False)
    land = run_stage(LAND, StageContext(store, "manual", settings))
    write_ref(store, "land", "manual", land.success, cache_hit=False, wall_seconds=0)
    validate = run_stage(VALIDATE, StageContext(store, "manual", settings))
    assert validate.success.counts.records_out == 0
    assert validate.success.counts.records_rejected == 2


def test_landed_bytes_that_do_not_match_the_manifest_are_quarantined(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text('{"text": "original words"}\n')
    store = ObjectStore(str(tmp_path / "root"))
    batch = land_batch(store, src, source="s", license_id="MIT", namespace="cloud").batch
    store.write_bytes(f"landing/{batch}/files/a.jsonl", b'{"text": "tampered"}\n')  # bit rot / tampering
    land = run_stage(LAND, StageContext(store, batch, PipelineConfigResource(progress=False)))
    assert land.success.rejects_by_reason == {"checksum_mismatch": 1}
    assert land.success.counts.records_out == 0
    assert not store.exists("cas")  # nothing unverified enters the content-addressed store
