"""Every supported format reads into the expected RawRecords, and detection picks the right reader."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from fm_assets.transforms.readers import (
    RawRecord,
    RawReject,
    UnsupportedFormat,
    detect_format,
    iter_raw_records,
)

DOCS = [
    {"text": "first document", "url": "https://a.example/1", "lang": "en", "n": 1},
    {"text": "zweites Dokument – ünïcödé ✓", "url": "https://a.example/2", "tags": ["x", "y"]},
    {"text": "third\nwith a newline inside", "source_id": "abc"},
]


def _jsonl_bytes(docs: list[dict]) -> bytes:
    return b"".join(json.dumps(doc, ensure_ascii=False).encode() + b"\n" for doc in docs)


def _records(path: Path, **kwargs) -> list[RawRecord | RawReject]:
    return list(iter_raw_records(path, **kwargs))


def _assert_docs(out: list, docs: list[dict]) -> None:
    assert all(isinstance(item, RawRecord) for item in out), out
    assert [r.record_index for r in out] == list(range(len(docs)))
    for record, doc in zip(out, docs, strict=True):
        assert record.text == doc["text"]
        assert record.url == doc.get("url")
        assert record.meta == {k: v for k, v in doc.items() if k not in ("text", "url")}


@pytest.mark.parametrize(
    ("name", "encode"),
    [
        ("docs.jsonl", lambda b: b),
        ("docs.ndjson", lambda b: b),
        ("docs.jsonl.gz", gzip.compress),
        ("docs.jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
        ("docs_checksum.jsonl.zst", lambda b: zstandard.ZstdCompressor(write_checksum=True).compress(b)),
    ],
)
def test_jsonl_family_reads_every_record(tmp_path: Path, name: str, encode) -> None:
    path = tmp_path / name
    path.write_bytes(encode(_jsonl_bytes(DOCS)))
    _assert_docs(_records(path), DOCS)


def test_multi_frame_zstd_and_multi_member_gzip(tmp_path: Path) -> None:
    first, second = _jsonl_bytes(DOCS[:2]), _jsonl_bytes(DOCS[2:])
    zst = tmp_path / "multi.jsonl.zst"
    with open(zst, "wb") as fh:
        for part in (first, second):
            writer = zstandard.ZstdCompressor().stream_writer(fh, closefd=False)  # no content size in header
            writer.write(part)
            writer.flush(zstandard.FLUSH_FRAME)
    gz = tmp_path / "multi.jsonl.gz"
    gz.write_bytes(gzip.compress(first) + gzip.compress(second))
    _assert_docs(_records(zst), DOCS)
    _assert_docs(_records(gz), DOCS)


def test_crlf_bom_and_missing_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + _jsonl_bytes(DOCS).replace(b"\n", b"\r\n").rstrip(b"\r\n"))
    _assert_docs(_records(path), DOCS)


def test_custom_text_field(tmp_path: Path) -> None:
    path = tmp_path / "content.jsonl"
    path.write_bytes(_jsonl_bytes([{"content": "hello", "text": "not the text"}]))
    [record] = _records(path, text_field="content")
    assert record.text == "hello" and record.meta == {"text": "not the text"}


def test_parquet_rows_across_row_groups(tmp_path: Path) -> None:
    rows = 5000
    table = pa.table(
        {
            "text": pa.array([f"row {i}" for i in range(rows)], pa.large_string()),
            "url": [f"https://p.example/{i}" for i in range(rows)],
            "score": [float(i) for i in range(rows)],
        }
    )
    path = tmp_path / "docs.parquet"
    pq.write_table(table, path, row_group_size=1500)
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    out = _records(path)
    assert [r.record_index for r in out] == list(range(rows))
    assert out[4321].text == "row 4321" and out[4321].url == "https://p.example/4321"
    assert out[4321].meta == {"score": 4321.0}


def test_text_and_markdown_are_one_document_per_file(tmp_path: Path) -> None:
    text = tmp_path / "note.txt"
    text.write_bytes("line one\r\nline two ✓\r\n".encode())
    markdown = tmp_path / "readme.md"
    markdown.write_text("Intro\n\n## Getting started ##\n\nRun `fm`.\n", encoding="utf-8")
    [plain] = _records(text)
    [md] = _records(markdown)
    assert plain.record_index == 0 and plain.text == "line one\nline two ✓\n" and plain.url is None
    assert md.text.startswith("Intro") and md.meta["title"] == "Getting started"


HTML = b"""<!DOCTYPE html><html><head><title>The  Title</title>
<link rel="canonical" href="https://h.example/page">
<style>body { color: red }</style><script>var secret = "do not keep";</script></head>
<body><nav>Menu</nav><h1>Heading</h1><p>First <b>bold</b> paragraph.</p><p>Second&nbsp;one</p>
<!-- a comment that must go --><noscript>enable js</noscript><ul><li>item a</li><li>item b</li></ul>
<script type="application/ld+json">{"x": 1}</script>tail text</body></html>"""


def test_html_text_extraction_drops_script_and_style(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_bytes(HTML)
    [record] = _records(path)
    assert record.url == "https://h.example/page"
    assert record.meta["title"] == "The Title"
    for hidden in ("secret", "color", "comment", "enable js", '"x"'):
        assert hidden not in record.text
    lines = record.text.split("\n")
    assert (
        "First bold paragraph." in lines and "Second one" in lines
    )  # inline joined, blocks split, nbsp squashed
    assert "item a" in lines and "item b" in lines and "tail text" in lines


@pytest.mark.parametrize("charset", ["iso-8859-1", "windows-1252", "latin1", "cp1252"])
def test_html_declared_charset_is_honoured(tmp_path: Path, charset: str) -> None:
    path = tmp_path / "latin.htm"
    path.write_bytes(
        f'<html><head><meta http-equiv="Content-Type" content="text/html; charset={charset}">'.encode()
        + b"</head><body><p>caf\xe9 \x93quoted\x94</p></body></html>"
    )
    [record] = _records(path)
    assert record.text.startswith("café ")


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("a.jsonl", b'{"text": 1}', "jsonl"),
        ("a.json", b"{", "jsonl"),
        ("A.JSONL.GZ", b"\x1f\x8b\x08", "jsonl.gz"),
        ("a.jsonl.zst", b"\x28\xb5\x2f\xfd", "jsonl.zst"),
        ("a.jsonl", b"\x1f\x8b\x08", "jsonl.gz"),  # mislabelled: magic wins
        ("a.jsonl.gz", b'  {"text": "plain"}', "jsonl"),  # already decompressed in transit
        ("a.jsonl.gz", b"garbage", "jsonl.gz"),  # kept, so the reader reports it corrupt
        ("part-00000", b"PAR1\x15\x04", "parquet"),
        ("x.parquet", b"PAR1", "parquet"),
        ("x.txt", b"\x1f\x8b", "text"),
        ("x.md", b"# t", "markdown"),
        ("x.htm", b"<html>", "html"),
    ],
)
def test_detect_format(name: str, head: bytes, expected: str) -> None:
    assert detect_format(name, head) == expected


@pytest.mark.parametrize(
    ("name", "head"), [("x.csv", b"a,b"), ("x.tar.gz", b"\x1f\x8b"), ("noext", b"hello")]
)
def test_detect_format_refuses_unknown(name: str, head: bytes) -> None:
    with pytest.raises(UnsupportedFormat, match="cannot tell the format"):
        detect_format(name, head)


def test_explicit_format_overrides_detection(tmp_path: Path) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(_jsonl_bytes(DOCS))
    _assert_docs(_records(path, fmt="jsonl"), DOCS)
    [item] = _records(path, fmt="xml")
    assert isinstance(item, RawReject) and item.reason == "unsupported_format"
