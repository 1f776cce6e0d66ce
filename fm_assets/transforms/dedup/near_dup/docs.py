"""The documents near-dup reads from a batch's parts: doc_id, text and quality_score, normalised and checked
(or, for the driver that only needs to know where each text is, doc_id, quality_score, file and row).

The in-process path reproduces the Spark path exactly only for unique, non-null doc ids and one schema across
the input files; anything else raises :class:`LocalUnsupported` before any work, and the caller runs Spark.
"""

from __future__ import annotations

import numpy as np
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


# what read_doc_places_arrow returns instead of the text: where each document's text is
PLACES_SCHEMA = pa.schema(
    [("doc_id", pa.string()), ("quality_score", pa.float32()), ("part", pa.int32()), ("row", pa.int64())]
)


def read_docs_arrow(docs_parquet: list[str]) -> pa.Table:
    """``signatures_spark.read_docs`` in-process: doc_id, text (string), quality_score (float32, null if absent)."""
    return _read_docs(docs_parquet, with_text=True)


def read_doc_places_arrow(docs_parquet: list[str]) -> pa.Table:
    """:func:`read_docs_arrow` without the text (the same checks, the same rows): doc_id, quality_score, and
    where the text is (``part``: the index in ``docs_parquet``, ``row``: the row in that file), for the
    worker processes that read the few texts scoring needs (``candidates.NodeScorer``)."""
    return _read_docs(docs_parquet, with_text=False)


def text_of_rows(path: str, rows: list[int]) -> pa.Array:
    """The ``text`` (as string) of ``rows`` of one Parquet file, in the order given."""
    text = pq.read_table(path, columns=["text"]).column("text").cast(pa.string())
    return text.take(pa.array(rows, pa.int64())).combine_chunks()


def _read_docs(docs_parquet: list[str], *, with_text: bool) -> pa.Table:
    schemas = [pq.read_schema(p) for p in docs_parquet]
    with_quality = {"quality_score" in s.names for s in schemas}
    if len(with_quality) > 1:
        raise LocalUnsupported("quality_score is in some input files only")
    tables = []
    for path, schema in zip(docs_parquet, schemas, strict=True):
        if "doc_id" not in schema.names or "text" not in schema.names:
            raise LocalUnsupported(f"{path}: no doc_id or text column")
        if not (_is_text(schema.field("doc_id").type) and _is_text(schema.field("text").type)):
            raise LocalUnsupported(f"{path}: doc_id or text is not a string column")
        has_quality = "quality_score" in schema.names
        if has_quality and not _is_number(schema.field("quality_score").type):
            raise LocalUnsupported(f"{path}: quality_score is not numeric")
        columns = ["doc_id", *(["text"] if with_text else []), *(["quality_score"] if has_quality else [])]
        table = pq.read_table(path, columns=columns)
        doc_id = table.column("doc_id").cast(pa.string())
        quality = (
            pc.cast(table.column("quality_score"), pa.float32(), safe=False)
            if has_quality
            else pa.nulls(table.num_rows, pa.float32())
        )
        if with_text:
            tables.append(
                pa.table([doc_id, table.column("text").cast(pa.string()), quality], schema=DOCS_SCHEMA)
            )
        else:
            part = pa.array(np.full(table.num_rows, len(tables), dtype=np.int32))
            row = pa.array(np.arange(table.num_rows, dtype=np.int64))
            tables.append(pa.table([doc_id, quality, part, row], schema=PLACES_SCHEMA))
    schema = DOCS_SCHEMA if with_text else PLACES_SCHEMA
    docs = pa.concat_tables(tables) if tables else schema.empty_table()
    ids = docs.column("doc_id")
    if ids.null_count:
        raise LocalUnsupported("null doc_id")
    if pc.count_distinct(ids).as_py() != docs.num_rows:
        raise LocalUnsupported("duplicate doc_id in the batch")
    return docs


def count_rows(docs_parquet: list[str]) -> int:
    """Rows of the input files from their parquet footers (what picks the engine; no Spark job)."""
    return sum(pq.read_metadata(path).num_rows for path in docs_parquet)
