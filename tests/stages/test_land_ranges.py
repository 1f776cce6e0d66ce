"""A big plain JSONL file lands as several line-aligned byte-range units whose records and rejects are the
whole-file read's (same doc ids, record indices, byte offsets, order), the same bytes with 1 and 2 workers;
the plan cuts it from the manifest's line index without reading it, as a plan that reads it would; a file
whose bytes are not the manifest's is quarantined once, and the CAS gets the file once."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine import landing, layout
from fm_assets.engine.integrity import DamagedDataError
from fm_assets.engine.landing import land_batch
from fm_assets.engine.line_index import LineSpan
from fm_assets.engine.materialize import materialize
from fm_assets.engine.run import StageOutcome, run_stage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.stages import land

SMALL_UNITS = 50_000  # below MIN_RANGE_BYTES: ranges are MIN_RANGE_BYTES long
LONG_LINE = 2 * land.MIN_RANGE_BYTES + 200_000  # one record longer than two ranges: it absorbs a cut point


def big_jsonl(path: Path) -> Path:
    """~4.7 MB: a BOM, blank and whitespace lines, a malformed line, a CRLF line, a non-object line, invalid
    UTF-8, a record longer than a range, and no final newline."""
    lines: list[bytes] = []
    for i in range(2600):
        text = f"Document {i} about line-aligned ranges. " + "word " * (50 + i % 200)
        lines.append(json.dumps({"text": text, "url": f"https://example.org/{i}"}).encode())
        if i % 97 == 0:
            lines.append(b"")
        if i % 211 == 0:
            lines.append(b"  \t ")
    lines[0] = b"\xef\xbb\xbf" + lines[0]
    lines[700] = b'{"text": "malformed'
    lines[701] = json.dumps({"text": "a CRLF line"}).encode() + b"\r"
    lines[1200] = b"[1, 2, 3]"
    lines[1201] = b'{"text": "caf\xe9"}'
    lines[1500] = json.dumps({"text": "long " * (LONG_LINE // 5)}).encode()
    path.write_bytes(b"\n".join(lines))
    return path


def settings(**overrides: Any) -> PipelineConfigResource:
    return PipelineConfigResource(**{"progress": False, "near_dedup": False, "workers": 1, **overrides})


def land_file(tmp_path: Path, name: str, src: Path) -> tuple[ObjectStore, str]:
    store = ObjectStore(str(tmp_path / name))
    batch = land_batch(
        store, src, source="web", license_id="MIT", namespace="cloud", batch_id="b-ranges"
    ).batch
    return store, batch  # the batch id is in the rows: the same in every root


def run_land(store: ObjectStore, batch: str, config: PipelineConfigResource) -> StageOutcome:
    return materialize(land.STAGE, StageContext(store, batch, config, {})).outcome


def rows(store: ObjectStore, rels: list[str], columns: list[str]) -> list[tuple]:
    return [
        tuple(row[c] for c in columns)
        for rel in rels
        for row in pq.read_table(store.local_path(rel), columns=columns).to_pylist()
    ]


def file_digests(store: ObjectStore, outcome: StageOutcome) -> dict[str, str]:
    return {
        rel.removeprefix(outcome.success.prefix): hashlib.sha256(
            store.local_path(rel).read_bytes()
        ).hexdigest()
        for rel in [*outcome.success.parts, *outcome.success.rejects]
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return big_jsonl(tmp_path_factory.mktemp("src") / "big.jsonl")


def test_ranges_give_the_whole_file_read(tmp_path, source):
    store, batch = land_file(tmp_path, "root-split", source)
    split = run_land(store, batch, settings(land_unit_bytes=SMALL_UNITS))
    whole_store, whole_batch = land_file(tmp_path, "root-whole", source)
    whole = run_land(whole_store, whole_batch, settings(land_unit_bytes=10 * source.stat().st_size))

    ctx = StageContext(store, batch, settings(land_unit_bytes=SMALL_UNITS))
    units = land.STAGE.plan(replace(ctx, side=land.STAGE.side_inputs(ctx)))
    assert [unit.unit_id for unit in units] == split.success.units
    whole_unit, *units = units  # the file's own unit (its CAS copy) first, then its ranges
    assert isinstance(whole_unit.span, land.WholeFile) and whole_unit.unit_id.endswith("w")
    spans = [unit.span for unit in units]
    assert len(units) >= 2 and all(isinstance(span, LineSpan) for span in spans)
    assert len(whole.success.units) == 1
    data = source.read_bytes()
    assert (
        [(s.start, s.end) for s in spans]
        == list(  # contiguous, cut just after a newline, cover the file
            zip([0] + [s.end for s in spans[:-1]], [s.start for s in spans[1:]] + [len(data)], strict=True)
        )
    )
    assert all(data[s.start - 1 : s.start] == b"\n" for s in spans[1:])
    assert len(units) < -(-len(data) // land.MIN_RANGE_BYTES)  # the long record absorbed a cut point

    doc_columns = ["doc_id", "record_index", "text", "url", "cas_hash"]
    kept = rows(store, split.success.parts, doc_columns)
    assert kept == rows(whole_store, whole.success.parts, doc_columns)
    texts = {row[2] for row in kept}
    assert kept[0][2].startswith("Document 0 ") and kept[0][1] == 0  # the BOM stripped at line 0
    assert "a CRLF line" in texts and max(map(len, texts)) > LONG_LINE - 100
    reject_columns = ["doc_id", "record_index", "reason", "text", "details"]
    rejected = rows(store, split.success.rejects, reject_columns)
    assert rejected == rows(whole_store, whole.success.rejects, reject_columns)
    assert sorted(r[2] for r in rejected) == ["invalid_utf8", "malformed_json", "wrong_schema"]
    non_blank = [line for line in data.removeprefix(b"\xef\xbb\xbf").split(b"\n") if line.strip()]
    assert len(kept) + len(rejected) == len(non_blank)
    assert any(json.loads(r[4])["byte_offset"] > spans[1].start for r in rejected)  # offsets are the file's
    for counts in (split.success.counts, whole.success.counts):
        assert counts.records_in == counts.records_out + counts.records_rejected
    split_counts, whole_counts = split.success.counts, whole.success.counts
    assert split_counts.records_in == whole_counts.records_in == len(non_blank)
    assert split.success.rejects_by_reason == whole.success.rejects_by_reason


def test_one_and_two_workers_land_the_same_bytes(tmp_path, source):
    digests = {}
    for workers in (1, 2):
        store, batch = land_file(tmp_path, f"root-w{workers}", source)
        outcome = run_land(store, batch, settings(land_unit_bytes=SMALL_UNITS, workers=workers))
        assert len(outcome.success.units) >= 2
        digests[workers] = file_digests(store, outcome)
        expected_where = "2 worker processes" if workers == 2 else "in-process"
        assert outcome.success.cost["units_where"] == expected_where
    assert digests[1] and digests[1] == digests[2]


def test_the_file_goes_into_the_cas_once(tmp_path, source):
    store, batch = land_file(tmp_path, "root", source)
    outcome = run_land(store, batch, settings(land_unit_bytes=SMALL_UNITS))
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    assert len(outcome.success.units) >= 2
    assert store.list(layout.cas_object(sha).rsplit("/", 1)[0]) == [layout.cas_object(sha)]
    assert store.sha256(layout.cas_object(sha)) == sha
    extra = outcome.success.extra
    assert (extra["files"], extra["cas_duplicate_files"], extra["bytes_in"]) == (
        1,
        0,
        len(source.read_bytes()),
    )
    # the copy is the whole-file unit's alone: no range unit reads the file whole
    (whole,) = [u for u in outcome.success.units if u.endswith("w")]
    marker = store.read_json(layout.unit_marker(outcome.success.prefix, whole))
    assert (marker["records_in"], marker["parts"], marker["extra"]["files"]) == (
        0,
        [],
        1,
    )
    ranges = [
        store.read_json(layout.unit_marker(outcome.success.prefix, u))
        for u in outcome.success.units
        if u != whole
    ]
    assert all(m["extra"]["files"] == 0 and m["records_in"] > 0 for m in ranges)


def plan(store: ObjectStore, batch: str, config: PipelineConfigResource) -> list:
    ctx = StageContext(store, batch, config)
    return land.STAGE.plan(replace(ctx, side=land.STAGE.side_inputs(ctx)))


def test_the_plan_cuts_from_the_manifest_index_as_a_read_would(tmp_path, source, monkeypatch):
    store, batch = land_file(tmp_path, "root", source)
    (entry,) = landing.read_batch_manifest(store, batch).files
    assert entry["line_index"]["every"] == landing.INDEX_EVERY and len(entry["line_index"]["starts"]) > 2
    config = settings(land_unit_bytes=SMALL_UNITS)

    def no_read(*args: Any) -> None:
        raise AssertionError("the plan read the file")

    with monkeypatch.context() as patch:
        patch.setattr(land, "index_lines", no_read)
        indexed = plan(store, batch, config)
    monkeypatch.setattr(landing, "INDEX_EVERY", 1 << 40)  # another writer's manifest: no line index
    bare_store, bare_batch = land_file(tmp_path, "root-bare", source)
    assert "line_index" not in landing.read_batch_manifest(bare_store, bare_batch).files[0]
    assert plan(bare_store, bare_batch, config) == indexed  # the plan that reads the file cuts it the same
    assert len(indexed) > 3


def test_a_manifest_index_that_does_not_tile_the_file_is_not_used(tmp_path, source, caplog):
    store, batch = land_file(tmp_path, "root", source)
    config = settings(land_unit_bytes=SMALL_UNITS)
    expected = plan(store, batch, config)
    (entry,) = landing.read_batch_manifest(store, batch).files
    entry = {**entry, "line_index": {**entry["line_index"], "starts": entry["line_index"]["starts"][::-1]}}
    raw_rel = layout.landed_file(batch, entry["path"])
    spans = land.line_spans(store, raw_rel, entry, SMALL_UNITS)
    assert spans == tuple(unit.span for unit in expected[1:])  # read and indexed here instead
    assert "reading the file to cut it instead" in caplog.text


def damage(store: ObjectStore, batch: str, name: str, at: int) -> None:
    path = store.local_path(layout.landed_file(batch, name))
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[at] = ord("#") if data[at] != ord("#") else ord("%")
    path.write_bytes(bytes(data))


def quarantined(store: ObjectStore, outcome: StageOutcome) -> list[tuple]:
    return rows(store, outcome.success.rejects, ["reason", "record_index"])


def test_a_file_damaged_after_landing_fails_once_then_is_quarantined_once(tmp_path, source):
    """The plan trusted the manifest's index: the unit reading the damaged chunk finds it, fails with the
    file's name and leaves a note; the re-run's plan reads the file, which no longer matches its manifest."""
    store, batch = land_file(tmp_path, "root", source)
    damage(store, batch, source.name, source.stat().st_size // 2)
    ctx = StageContext(store, batch, settings(land_unit_bytes=SMALL_UNITS), {})
    with pytest.raises(
        DamagedDataError, match=r"big.jsonl .*changed after it was landed or planned; run land again"
    ):
        run_stage(land.STAGE, ctx)
    (note,) = store.list(layout.rescan_notes("land", batch))
    assert store.read_json(note)["path"] == source.name
    outcome = run_stage(land.STAGE, ctx)
    assert len(outcome.success.units) == 1  # not cut: its bytes are not the manifest's
    assert quarantined(store, outcome) == [("checksum_mismatch", -1)]
    counts = outcome.success.counts
    assert (counts.records_in, counts.records_out, counts.records_rejected) == (1, 0, 1)
    assert not store.list("cas")


def test_a_damaged_file_without_an_index_is_quarantined_once_not_split(tmp_path, source, monkeypatch):
    monkeypatch.setattr(landing, "INDEX_EVERY", 1 << 40)  # the plan reads the file and sees the damage
    store, batch = land_file(tmp_path, "root", source)
    damage(store, batch, source.name, source.stat().st_size // 2)
    outcome = run_land(store, batch, settings(land_unit_bytes=SMALL_UNITS))
    assert len(outcome.success.units) == 1
    assert quarantined(store, outcome) == [("checksum_mismatch", -1)]
    assert outcome.success.counts.records_rejected == 1 and not store.list("cas")


def test_bytes_changed_after_the_plan_fail_the_unit_then_quarantine_once(tmp_path, source, monkeypatch):
    store, batch = land_file(tmp_path, "root", source)
    planned = land.line_spans

    def plan_then_damage(*args: Any, **kwargs: Any) -> tuple[LineSpan, ...]:
        spans = planned(*args, **kwargs)
        damage(store, batch, source.name, spans[-1].start + 5)  # a byte in the last span
        return spans

    monkeypatch.setattr(land, "line_spans", plan_then_damage)
    ctx = StageContext(store, batch, settings(land_unit_bytes=SMALL_UNITS), {})
    with pytest.raises(DamagedDataError, match="changed after it was landed or planned"):
        run_stage(land.STAGE, ctx)
    monkeypatch.setattr(land, "line_spans", planned)
    outcome = run_stage(land.STAGE, ctx)  # the re-run plans the file whole: one quarantine, no range output
    assert quarantined(store, outcome) == [("checksum_mismatch", -1)]
    assert outcome.success.counts.records_out == 0


def test_ranges_on_an_s3_root_land_the_local_rows_without_downloading_the_file(
    tmp_path, source, s3_env, monkeypatch
):
    """On S3 each span's unit reads its own bytes (ranged reads); only the whole-file unit fetches the file,
    for the CAS copy. The rows are the local root's."""
    from fm_assets.defs.resources.object_store import ObjectStoreResource

    root = f"s3://{s3_env['bucket']}/ranges-{tmp_path.name}"
    s3 = ObjectStoreResource(root=root, s3_endpoint_url=s3_env["endpoint"]).store()
    batch = land_batch(
        s3, source, source="web", license_id="MIT", namespace="cloud", batch_id="b-ranges"
    ).batch
    fetched: list[str] = []
    local_copy = ObjectStore.local_copy

    def counted(self: ObjectStore, rel: str):
        fetched.append(rel)
        return local_copy(self, rel)

    monkeypatch.setattr(ObjectStore, "local_copy", counted)
    on_s3 = run_land(s3, batch, settings(land_unit_bytes=SMALL_UNITS))
    monkeypatch.setattr(ObjectStore, "local_copy", local_copy)
    assert len(on_s3.success.units) > 3
    assert fetched.count(layout.landed_file(batch, source.name)) == 1  # the CAS copy's, not one per span

    store, local_batch = land_file(tmp_path, "root-local", source)
    local = run_land(store, local_batch, settings(land_unit_bytes=SMALL_UNITS))
    columns = ["doc_id", "record_index", "text", "cas_hash"]

    def s3_rows(rels: list[str]) -> list[tuple]:
        out = []
        for rel in rels:
            with s3.open(rel) as handle:
                out.extend(
                    tuple(r[c] for c in columns) for r in pq.read_table(handle, columns=columns).to_pylist()
                )
        return out

    assert s3_rows(on_s3.success.parts) == rows(store, local.success.parts, columns)
