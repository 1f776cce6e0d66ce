"""A file's line index (what ``fm land`` records for a big text file): its chunks tile the file at line starts,
survive the manifest's JSON, group into spans whose reads are the whole-file read, and a span's check finds
any byte or line number that no longer matches; an index that does not describe the file is refused."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from fm_assets.engine.line_index import LineIndex, LineIndexError, LineSpan, check_span, index_lines
from fm_assets.transforms.readers import iter_raw_records
from fm_assets.transforms.readers.line_ranges import iter_jsonl_range


def generated(rng: random.Random, lines: int) -> bytes:
    rows = []
    for i in range(lines):
        if rng.random() < 0.05:
            rows.append(rng.choice([b"", b"  ", b"{bad", b"\xff not utf-8"]))
        else:
            rows.append(json.dumps({"text": f"doc {i} " + "z" * int(rng.paretovariate(1.1) * 40)}).encode())
    return b"\n".join(rows) + (b"\n" if rng.random() < 0.5 else b"")


@pytest.mark.parametrize("seed", range(12))
def test_spans_of_the_index_read_as_the_whole_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = generated(rng, rng.randint(1, 3000))
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    every = rng.choice([64, 1000, 1 << 14])
    sha256, index = index_lines(io.BytesIO(data), len(data), every)
    assert sha256 == hashlib.sha256(data).hexdigest()
    assert index == LineIndex.from_json(json.loads(json.dumps(index.to_json())), len(data))
    chunks = index.chunks
    assert chunks[0].start == 0 and chunks[-1].end == len(data) and index.lines == data.count(b"\n")
    for before, after in itertools.pairwise(chunks):
        assert before.end == after.start and data[after.start - 1] == ord("\n")
        assert after.first_line == data[: after.start].count(b"\n")
    assert all(c.sha256 == hashlib.sha256(data[c.start : c.end]).hexdigest() for c in chunks)

    pieces = rng.randint(1, 40)
    spans = index.spans(pieces)
    assert 1 <= len(spans) <= pieces and tuple(c for s in spans for c in s.chunks) == chunks
    assert all(check_span(path, span) is None for span in spans)
    if index.has_content:
        whole = list(iter_raw_records(path, max_record_bytes=1 << 20))
        read = [
            item
            for span in spans
            for item in iter_jsonl_range(path, span, max_record_bytes=1 << 20, text_field="text")
        ]
        assert read == whole


def test_a_span_check_finds_changed_bytes_lines_and_starts(tmp_path: Path) -> None:
    data = generated(random.Random(5), 2000)
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    _, index = index_lines(io.BytesIO(data), len(data), 4096)
    spans = index.spans(6)
    middle = spans[2]
    assert check_span(path, middle) is None

    changed = bytearray(data)
    changed[middle.start + 10] ^= 1
    path.write_bytes(bytes(changed))
    assert "sha256" in (check_span(path, middle) or "")
    assert check_span(path, spans[0]) is None  # the other spans' bytes are still theirs
    path.write_bytes(data)

    # digests that match but line numbers that lie (a crafted index): the line count gives it away
    lying = LineSpan(middle.chunks, middle.end_line + 1)
    assert "lines" in (check_span(path, lying) or "")
    # a span that does not start on a line start
    first = middle.chunks[0]
    shifted = replace(
        first, start=first.start + 1, sha256=hashlib.sha256(data[first.start + 1 : first.end]).hexdigest()
    )
    assert "not a line start" in (check_span(path, LineSpan((shifted,), middle.chunks[1].first_line)) or "")
    path.write_bytes(data[: middle.end - 3])  # truncated
    assert check_span(path, spans[-1]) is not None


@pytest.mark.parametrize(
    "edit",
    [
        lambda j: {**j, "starts": j["starts"][1:]},  # lists of different lengths
        lambda j: {**j, "starts": [1, *j["starts"][1:]]},  # does not start at 0
        lambda j: {**j, "starts": [j["starts"][0], j["starts"][2], j["starts"][1], *j["starts"][3:]]},
        lambda j: {**j, "first_lines": [0, *reversed(j["first_lines"][1:])]},  # line numbers decrease
        lambda j: {**j, "sha256": ["x" * 64, *j["sha256"][1:]]},
        lambda j: {k: v for k, v in j.items() if k != "lines"},
    ],
)
def test_an_index_that_does_not_describe_the_file_is_refused(edit) -> None:
    data = generated(random.Random(9), 500)
    _, index = index_lines(io.BytesIO(data), len(data), 512)
    assert len(index.chunks) > 3
    with pytest.raises(LineIndexError):
        LineIndex.from_json(edit(index.to_json()), len(data))
    with pytest.raises(LineIndexError):  # the last chunk must end at the file's size
        LineIndex.from_json(index.to_json(), index.chunks[-1].start)
