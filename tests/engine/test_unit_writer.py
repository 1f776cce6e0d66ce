"""UnitWriter: parts roll over by rows or by bytes of text, every file it adds is returned for hashing, and
its Parquet carries page checksums that catch a flipped bit on read."""

from __future__ import annotations

import random
import string

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fm_assets.engine.store import ObjectStore, UnreadableFileError, iter_parquet_batches
from fm_assets.engine.unit_writer import UnitWriter

SCHEMA = pa.schema([pa.field("doc_id", pa.string()), pa.field("text", pa.large_string())])


def _write(tmp_path, rows: int, text_len: int, **rolling) -> list:
    rng = random.Random(0)  # text that does not compress away, so pages hold most of the file
    writer = UnitWriter(tmp_path, "u1", SCHEMA, **rolling)
    for i in range(rows):
        writer.write({"doc_id": f"d{i}", "text": "".join(rng.choices(string.ascii_letters, k=text_len))})
    writer.close()
    return writer.part_files


def test_parts_roll_by_bytes_of_text(tmp_path):
    parts = _write(tmp_path, rows=100, text_len=1000, bytes_per_file=10_000)
    assert len(parts) == 10  # ~10 rows of ~1 KB per 10 KB part
    assert sum(pq.read_metadata(p).num_rows for p in parts) == 100


def test_without_rolling_one_part(tmp_path):
    assert len(_write(tmp_path, rows=100, text_len=1000)) == 1


def test_added_files_are_committed_with_the_parts(tmp_path):
    writer = UnitWriter(tmp_path, "u1", SCHEMA)
    writer.add_file("shard-u1-0000.tar", b"payload")
    with pytest.raises(ValueError, match="added twice"):
        writer.add_file("shard-u1-0000.tar", b"again")
    with pytest.raises(ValueError, match="not a plain file name"):
        writer.add_file("../escape", b"x")
    files = writer.close()
    assert tmp_path / "shard-u1-0000.tar" in files


def test_flipped_bit_in_a_page_is_caught_and_named(tmp_path):
    (part,) = _write(tmp_path, rows=50, text_len=3000)
    data = bytearray(part.read_bytes())
    data[len(data) // 3] ^= 0x04
    part.write_bytes(bytes(data))
    store = ObjectStore(str(tmp_path))
    with pytest.raises(UnreadableFileError, match=part.name):
        for _ in iter_parquet_batches(store, part.name):
            pass
