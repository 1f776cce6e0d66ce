"""Blocklist removals on Spark: URL domains, document hashes, and revoked (source, licence) pairs.

The lists and their file format are in ``lists.py``. One row per removed document;
when several lists match, the reason is the first of ``revoked_license``, ``blocked_domain``,
``blocked_doc_hash`` and ``details`` names every match. All joins are equi-joins on Spark (domain
suffixes of the URL host, text sha256, source/licence), with the lists broadcast.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from fm_assets.transforms.blocklist.lists import WILDCARD, Blocklists

REASON_ORDER = ("revoked_license", "blocked_domain", "blocked_doc_hash")
REMOVED_SCHEMA = pa.schema(
    [pa.field("doc_id", pa.string()), pa.field("reason", pa.string()), pa.field("details", pa.string())]
)


def _frame(spark: SparkSession, rows: list[tuple], schema: T.StructType) -> DataFrame:
    if not rows:
        return spark.range(0).select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields])
    return spark.createDataFrame(rows, schema)


def _domain_matches(docs: DataFrame, domains: DataFrame) -> DataFrame:
    host = F.lower(F.expr("try_parse_url(url, 'HOST')"))
    parts = F.split(F.regexp_replace(host, r"\.$", ""), r"\.")
    suffixes = F.expr(
        "transform(sequence(1, size(parts)), i -> array_join(slice(parts, i, size(parts)), '.'))"
    )
    with_host = docs.where(F.col("url").isNotNull()).select(
        "doc_id", host.alias("host"), parts.alias("parts")
    )
    exploded = with_host.where(F.col("host").isNotNull()).select(
        "doc_id", "host", F.explode(suffixes).alias("domain")
    )
    return (
        exploded.join(F.broadcast(domains), "domain")
        .groupBy("doc_id")
        .agg(
            F.to_json(
                F.struct(
                    F.first("host").alias("host"), F.sort_array(F.collect_set("domain")).alias("domains")
                )
            ).alias("detail")
        )
        .select("doc_id", F.lit("blocked_domain").alias("reason"), "detail")
    )


def _hash_matches(docs: DataFrame, hashes: DataFrame) -> DataFrame:
    hashed = docs.select("doc_id", F.sha2(F.coalesce(F.col("text"), F.lit("")), 256).alias("doc_hash"))
    return hashed.join(F.broadcast(hashes), "doc_hash").select(
        "doc_id",
        F.lit("blocked_doc_hash").alias("reason"),
        F.to_json(F.struct(F.col("doc_hash").alias("sha256"))).alias("detail"),
    )


def _revoked_matches(docs: DataFrame, revoked: DataFrame) -> DataFrame:
    # expand each doc to its four (source|*, licence|*) keys so wildcards become equi-joins
    keys = docs.select(
        "doc_id",
        "source",
        "license",
        F.explode(
            F.array(
                F.struct(F.col("source").alias("s"), F.col("license").alias("l")),
                F.struct(F.col("source").alias("s"), F.lit(WILDCARD).alias("l")),
                F.struct(F.lit(WILDCARD).alias("s"), F.col("license").alias("l")),
                F.struct(F.lit(WILDCARD).alias("s"), F.lit(WILDCARD).alias("l")),
            )
        ).alias("k"),
    ).select("doc_id", "source", "license", F.col("k.s").alias("s"), F.col("k.l").alias("l"))
    return (
        keys.join(F.broadcast(revoked), ["s", "l"])
        .groupBy("doc_id", "source", "license")
        .agg(F.sort_array(F.collect_set(F.concat_ws("/", "s", "l"))).alias("rules"))
        .select(
            "doc_id",
            F.lit("revoked_license").alias("reason"),
            F.to_json(F.struct("source", "license", "rules")).alias("detail"),
        )
    )


def blocklist_matches(spark: SparkSession, docs: DataFrame, lists: Blocklists) -> DataFrame:
    """One row per removed doc: doc_id, reason, details (JSON with every match)."""
    lists = lists.normalised()
    string = T.StringType()
    domains = _frame(
        spark, [(d,) for d in lists.url_domains], T.StructType([T.StructField("domain", string)])
    )
    hashes = _frame(
        spark, [(h,) for h in lists.doc_hashes], T.StructType([T.StructField("doc_hash", string)])
    )
    revoked = _frame(
        spark, list(lists.revoked), T.StructType([T.StructField("s", string), T.StructField("l", string)])
    )
    parts = []
    if lists.revoked:
        parts.append(_revoked_matches(docs, revoked))
    if lists.url_domains:
        parts.append(_domain_matches(docs, domains))
    if lists.doc_hashes:
        parts.append(_hash_matches(docs, hashes))
    if not parts:
        return _frame(
            spark, [], T.StructType([T.StructField(n, string) for n in ("doc_id", "reason", "details")])
        )
    matches = parts[0]
    for extra in parts[1:]:
        matches = matches.unionByName(extra)
    priority = F.array_position(F.array(*[F.lit(r) for r in REASON_ORDER]), F.col("reason"))
    return (
        matches.groupBy("doc_id")
        .agg(F.sort_array(F.collect_list(F.struct(priority.alias("p"), "reason", "detail"))).alias("all"))
        .select(
            "doc_id",
            F.col("all")[0]["reason"].alias("reason"),
            # reasons are fixed identifiers and details are JSON already: the object is assembled as text
            F.concat(
                F.lit("{"),
                F.concat_ws(
                    ",",
                    F.transform("all", lambda e: F.concat(F.lit('"'), e["reason"], F.lit('":'), e["detail"])),
                ),
                F.lit("}"),
            ).alias("details"),
        )
    )


def run_blocklists(spark: SparkSession, docs_parquet: list[str], lists: Blocklists) -> pa.Table:
    """Removed documents (doc_id, reason, details JSON) sorted by doc_id; the lists are broadcast."""
    docs = spark.read.parquet(*docs_parquet)
    columns = set(docs.columns)
    docs = docs.select(
        F.col("doc_id").cast("string"),
        (F.col("url") if "url" in columns else F.lit(None)).cast("string").alias("url"),
        F.col("text").cast("string"),
        (F.col("source") if "source" in columns else F.lit(None)).cast("string").alias("source"),
        (F.col("license") if "license" in columns else F.lit(None)).cast("string").alias("license"),
    )
    table = blocklist_matches(spark, docs, lists).orderBy("doc_id").toArrow()
    if table.num_rows == 0:
        return REMOVED_SCHEMA.empty_table()
    return table.cast(REMOVED_SCHEMA)
