"""The Spark ``StructType`` of an Arrow schema, for the Spark path only (imports pyspark when first called).

Every near-dup schema is declared once, in Arrow (what the in-process path and the ``mapInArrow`` bodies
produce); the Spark path reads and maps with the ``StructType`` derived here, so the two cannot drift.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


@cache
def spark_schema(schema: pa.Schema) -> StructType:
    """``schema`` as Spark types (string, int32/int64, float32/float64, bool, binary, list of them)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)
