"""The documents near-dup reads from a batch's parts: doc_id, text and quality_score, normalised and checked
(or, for a driver handed signature rows computed elsewhere, the same checks on the files' footers and the
rows' ids: :func:`check_schemas`, :func:`check_doc_ids`).

The in-process path reproduces the Spark path exactly only for unique, non-null doc ids and one schema across
the input files; anything else raises :class:`LocalUnsupported` before anything is written (the signature
units may have run: they are a cache), and the caller runs Spark.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

DOCS_SCHEMA = pa.schema([("doc_id", pa.string()), ("text", pa.string()), ("quality_score", pa.float32())])


class LocalUnsupported(Exception):
    """The input is outside what the in-process path reproduces exactly; run the Spark path instead."""


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_null(t)


def read_docs_arrow(docs_parquet: list[str]) -> pa.Table:
    """``signatures_spark.read_docs`` in-process: doc_id, text (string), quality_score (float32, null if absent)."""
    tables = []
    for path, has_quality in zip(docs_parquet, check_schemas(docs_parquet), strict=True):
        columns = ["doc_id", "text", *(["quality_score"] if has_quality else [])]
        table = pq.read_table(path, columns=columns)
        quality = (
            pc.cast(table.column("quality_score"), pa.float32(), safe=False)
            if has_quality
            else pa.nulls(table.num_rows, pa.float32())
        )
        doc_id, text = table.column("doc_id").cast(pa.string()), table.column("text").cast(pa.string())
        tables.append(pa.table([doc_id, text, quality], schema=DOCS_SCHEMA))
    docs = pa.concat_tables(tables) if tables else DOCS_SCHEMA.empty_table()
    check_doc_ids(docs.column("doc_id"))
    return docs


def check_schemas(docs_parquet: list[str]) -> list[bool]:
    """The input files' columns, from their footers: whether each has ``quality_score``. Raises
    :class:`LocalUnsupported` for what the in-process path does not reproduce."""
    schemas = [pq.read_schema(p) for p in docs_parquet]
    with_quality = {"quality_score" in s.names for s in schemas}
    if len(with_quality) > 1:
        raise LocalUnsupported("quality_score is in some input files only")
    for path, schema in zip(docs_parquet, schemas, strict=True):
        if "doc_id" not in schema.names or "text" not in schema.names:
            raise LocalUnsupported(f"{path}: no doc_id or text column")
        if not (_is_text(schema.field("doc_id").type) and _is_text(schema.field("text").type)):
            raise LocalUnsupported(f"{path}: doc_id or text is not a string column")
        if "quality_score" in schema.names and not _is_number(schema.field("quality_score").type):
            raise LocalUnsupported(f"{path}: quality_score is not numeric")
    return ["quality_score" in s.names for s in schemas]


def check_doc_ids(ids: pa.ChunkedArray | pa.Array) -> None:
    """Raises :class:`LocalUnsupported` unless the batch's doc ids are non-null and unique."""
    if ids.null_count:
        raise LocalUnsupported("null doc_id")
    if pc.count_distinct(ids).as_py() != len(ids):
        raise LocalUnsupported("duplicate doc_id in the batch")


def text_of_rows(path: str, rows: list[int]) -> pa.Array:
    """The ``text`` (as string) of ``rows`` of one Parquet file, in the order given."""
    text = pq.read_table(path, columns=["text"]).column("text").cast(pa.string())
    return text.take(pa.array(rows, pa.int64())).combine_chunks()


def count_rows(docs_parquet: list[str]) -> int:
    """Rows of the input files from their parquet footers (what picks the engine; no Spark job)."""
    return sum(pq.read_metadata(path).num_rows for path in docs_parquet)
