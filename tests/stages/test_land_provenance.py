"""A JSONL record's own id and licence survive landing as provenance; a record licence that is not the
batch's is quarantined with both licences instead of being relabelled with the batch's."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.run import run_stage
from fm_assets.engine.schemas import make_doc_id
from fm_assets.engine.spdx import parse
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.stages import land
from fm_assets.transforms.readers.provenance import record_provenance

RECORDS = [
    {"text": "kept, with its own id and the same licence", "id": "page-17", "license": "mit"},
    {"text": "another licence than the batch's", "id": 42, "license": "CC-BY-SA-4.0"},
    {"text": "a licence that is not SPDX", "licence": "free for research"},
    {"text": "no statement: a null licence", "license": None, "id": None},
    {"text": "no statement: a blank licence", "license": "  "},
    {"text": "no licence field at all"},
]


def test_record_id_and_licence_are_kept_and_a_conflict_is_quarantined(tmp_path):
    store = ObjectStore(str(tmp_path / "root"))
    src = tmp_path / "records.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    batch = land_batch(store, src, source="web", license_id="MIT", namespace="cloud").batch
    outcome = run_stage(land.STAGE, StageContext(store, batch, PipelineConfigResource(progress=False), {}))

    counts = outcome.success.counts
    assert (counts.records_in, counts.records_out, counts.records_rejected) == (6, 4, 2)
    assert outcome.success.rejects_by_reason == {"license_conflict": 2}
    kept = [
        row for part in outcome.success.parts for row in pq.read_table(store.local_path(part)).to_pylist()
    ]
    by_text = {row["text"]: row for row in kept}
    first = by_text[RECORDS[0]["text"]]
    assert (first["source_id"], first["record_license"], first["license"]) == ("page-17", "MIT", "MIT")
    assert first["doc_id"] == make_doc_id(first["cas_hash"], 0)  # the pipeline's own id scheme is unchanged
    for index in (3, 4, 5):
        row = by_text[RECORDS[index]["text"]]
        assert (row["source_id"], row["record_license"], row["license"]) == (None, None, "MIT")

    rejects = [
        {**row, "details": json.loads(row["details"])}
        for rel in outcome.success.rejects
        for row in pq.read_table(store.local_path(rel)).to_pylist()
    ]
    other, not_spdx = sorted(rejects, key=lambda row: row["record_index"])
    assert other["doc_id"] == make_doc_id(other["cas_hash"], 1) and other["text"] == RECORDS[1]["text"]
    assert other["details"] == {
        "field": "license",
        "record_license": "CC-BY-SA-4.0",
        "batch_license": "MIT",
        "why": "is not the batch's (nor one of its OR alternatives)",
        "source_id": "42",
        "file": "records.jsonl",
    }
    assert (
        not_spdx["details"]["field"] == "licence"
        and not_spdx["details"]["record_license"] == "free for research"
    )
    assert not_spdx["details"]["why"] == "not an SPDX licence expression"


@pytest.mark.parametrize(
    ("record", "batch", "kept"),
    [
        ("GPL-2.0-or-later OR CC-BY-SA-3.0", "CC-BY-SA-3.0", True),  # the lander elected one alternative
        ("gpl-2.0-or-later or cc-by-sa-3.0", "GPL-2.0-or-later OR CC-BY-SA-3.0", True),
        ("MIT", "MIT OR Apache-2.0", False),  # the batch would grant Apache-2.0, which the record does not
        ("MIT AND BSD-3-Clause", "MIT", False),  # both apply: MIT alone drops one
        ("CC-BY-4.0", "CC-BY-SA-4.0", False),
    ],
)
def test_a_batch_licence_may_elect_one_alternative_of_a_record_or(record, batch, kept):
    provenance = record_provenance({"license": record}, batch)
    assert (provenance.conflict is None) == kept
    assert provenance.record_license == str(parse(record))
