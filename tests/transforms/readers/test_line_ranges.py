"""Line-aligned ranges of a plain JSONL file: the scan's cut points, line numbers and hashes are the file's,
and reading every range gives exactly the whole-file read, on generated files full of awkward lines."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import random
from pathlib import Path

import pytest

from fm_assets.engine.line_index import scan_line_ranges
from fm_assets.transforms.readers import iter_raw_records
from fm_assets.transforms.readers.line_ranges import iter_jsonl_range

AWKWARD = (
    b"",
    b"   \t",
    b"{bad json",
    b"\xff\xfe not utf-8",
    b"[1, 2]",
    b'{"text": "  "}',
    b"\xef\xbb\xbf{}",
)


def generated(rng: random.Random) -> bytes:
    lines = []
    for i in range(rng.randint(0, 60)):
        if rng.random() < 0.3:
            lines.append(rng.choice(AWKWARD))
        else:
            line = json.dumps({"text": f"doc {i} " + "y" * rng.randint(0, 500), "url": f"u{i}"}).encode()
            lines.append(line + (b"\r" if rng.random() < 0.1 else b""))
    data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
    return b"\xef\xbb\xbf" + data if rng.random() < 0.3 else data


@pytest.mark.parametrize("seed", range(150))
def test_ranges_read_as_the_whole_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data = generated(rng)
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    max_record_bytes = rng.choice([200, 1 << 20])  # 200: some lines are oversized rejects
    whole = list(iter_raw_records(path, max_record_bytes=max_record_bytes))

    pieces = rng.randint(1, 12)
    scan = scan_line_ranges(io.BytesIO(data), len(data), pieces, chunk_size=rng.choice([7, 64, 1 << 20]))
    assert (scan.sha256, scan.size) == (hashlib.sha256(data).hexdigest(), len(data))
    ranges = scan.ranges
    assert 1 <= len(ranges) <= pieces
    assert ranges[0].start == 0 and ranges[-1].end == len(data)
    for before, after in itertools.pairwise(ranges):
        assert before.end == after.start > before.start and data[after.start - 1] == ord("\n")
    for span in ranges:
        assert span.first_line == data[: span.start].count(b"\n")
        assert span.sha256 == hashlib.sha256(data[span.start : span.end]).hexdigest()
    # a file with no non-blank line is left whole: its one empty_file reject is the whole file's
    assert scan.has_content == all(getattr(item, "reason", None) != "empty_file" for item in whole)
    if scan.has_content:
        read = [
            item
            for span in ranges
            for item in iter_jsonl_range(path, span, max_record_bytes=max_record_bytes, text_field="text")
        ]
        assert read == whole
