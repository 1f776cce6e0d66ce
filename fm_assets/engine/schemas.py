"""The document record schema every stage reads and writes, and the rejects schema.

A record keeps a pointer to its raw bytes (``cas_hash`` + ``record_index``) and its batch, source,
licence and namespace all the way to the shard row (DESIGN: provenance threaded).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

DOC_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),  # f"{cas_hash[:16]}:{record_index}"
        pa.field("batch", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("license", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("cas_hash", pa.string(), nullable=False),  # sha256 of the raw landed file
        pa.field("record_index", pa.int64(), nullable=False),  # record number inside that file
        pa.field("url", pa.string()),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("lang", pa.string()),
        pa.field("lang_score", pa.float32()),
        pa.field("quality_score", pa.float32()),  # higher is better; used to pick dedup survivors
        pa.field("pii_flags", pa.string()),  # JSON list of PII kinds found (pre-flag, not removed)
        # the record's own provenance, as its source gave it (transforms/readers/provenance.py)
        pa.field("source_id", pa.string()),  # its own id field
        pa.field("record_license", pa.string()),  # its own licence field (canonical SPDX; equals `license`)
    ]
)

REJECT_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string()),
        pa.field("batch", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("details", pa.string()),  # JSON object
        pa.field("cas_hash", pa.string()),
        pa.field("record_index", pa.int64()),
        pa.field("text", pa.large_string()),  # the rejected content (or a prefix for huge/binary input)
    ]
)


LANDED_DETAILS = ("origin", "key")  # media record fields a reject keeps in its details


def make_doc_id(cas_hash: str, record_index: int) -> str:
    return f"{cas_hash[:16]}:{record_index}"


def reject_row(
    record: dict[str, Any] | None,
    *,
    batch: str,
    stage: str,
    reason: str,
    details: dict[str, Any] | None = None,
    cas_hash: str | None = None,
    record_index: int | None = None,
    text: str | None = None,
) -> dict[str, Any]:
    """Build one rejects-table row; ``record`` (a DOC_SCHEMA or media record dict) supplies defaults, and a
    media sample's landed file (``origin``: its path inside the batch, plus ``#key`` inside a tar or JSONL) and
    key go into the details, so a reject at any stage names the file to look at."""
    record = record or {}
    details = {**{k: record[k] for k in LANDED_DETAILS if record.get(k) is not None}, **(details or {})}
    return {
        "doc_id": record.get("doc_id"),
        "batch": batch,
        "stage": stage,
        "reason": reason,
        "details": json.dumps(details, sort_keys=True, default=str),
        "cas_hash": cas_hash if cas_hash is not None else record.get("cas_hash"),
        "record_index": record_index if record_index is not None else record.get("record_index"),
        "text": text if text is not None else record.get("text"),
    }


def docs_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=DOC_SCHEMA)


def rejects_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=REJECT_SCHEMA)
