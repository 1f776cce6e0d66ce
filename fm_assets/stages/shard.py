"""shard: packed rows -> WebDataset shards through ``fm_loader``'s writer, plus the partition manifest.

Shards are byte-for-byte reproducible (the writer fixes member order and mtimes); this stage's output
table maps every packed row to its shard and position, and ``manifest.json`` lists the shards with
their sha256, row and token counts, tokenizer hash and producing code version.

Rows with per-token columns (the pack output's ``token_columns``) are stored with them (shard format
version 3, the columns under the row checksum); a shard without any is written as version 2, as before.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fm_assets.engine import layout
from fm_assets.engine.checks import CheckOutcome, StageCheck, stored_digests
from fm_assets.engine.records import StageSuccess, UnitMarker
from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.tokens.schemas import SHARD_ROWS_SCHEMA, flat_tokens, row_token_columns
from fm_loader.format import PLAIN_FORMAT_VERSION, PackedRow, encode_shard
from fm_loader.manifest import DatasetManifest, ShardEntry

MANIFEST = "manifest.json"


def check_shard_integrity(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Every shard listed in the manifest exists with the recorded sha256 (the shards re-read and hashed on
    the stage's workers), and row counts add up."""
    manifest = DatasetManifest.from_json(store.read_bytes(success.artifacts["manifest"]))
    digests = stored_digests(
        store, [layout.in_output(success.prefix, entry.path) for entry in manifest.shards]
    )
    bad = [
        entry.path for entry, digest in zip(manifest.shards, digests, strict=True) if digest != entry.sha256
    ]
    rows_out = success.counts.records_out
    return CheckOutcome(
        not bad and manifest.rows == rows_out,
        {
            "shards": len(manifest.shards),
            "bad_shards": bad,
            "manifest_rows": manifest.rows,
            "rows_out": rows_out,
        },
        "shard files match their manifest sha256 and every packed row is in a shard",
    )


class ShardStage(Stage):
    name = "shard"
    code_version = "shard-v4"  # v4: per-token columns (format 3 shards when the rows carry them)
    upstream = "pack"
    description = "WebDataset shards (fm_loader format) and the partition's dataset manifest."
    output_schema = SHARD_ROWS_SCHEMA
    checks = (
        StageCheck("shard_integrity", "shards match manifest sha256; rows complete", check_shard_integrity),
    )

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"rows_per_shard": ctx.settings.rows_per_shard}

    def process(self, unit: UnitContext) -> UnitResult:
        ctx = unit.partition
        seq_len = ctx.upstream_input.artifacts["seq_len"]
        vocab_size = ctx.upstream_input.artifacts["vocab_size"]
        with ctx.store.open(unit.unit.inputs[0]) as handle:
            table = pq.read_table(handle)
        values, offsets = flat_tokens(table["tokens"])
        row_ids = table["row_id"].to_pylist()
        doc_lens = table["doc_lens"].to_pylist()
        doc_ids = table["doc_ids"].to_pylist()
        if "token_columns" in table.column_names:
            columns = row_token_columns(table["token_columns"])
        else:  # a pack output written before per-token columns
            columns = [{} for _ in row_ids]
        format_version = PLAIN_FORMAT_VERSION
        per_shard = ctx.settings.rows_per_shard
        shards: list[dict[str, Any]] = []
        for shard_no, first in enumerate(range(0, len(row_ids), per_shard)):
            name = f"shard-{unit.unit.unit_id}-{shard_no:04d}"
            rows = range(first, min(first + per_shard, len(row_ids)))
            packed = (
                PackedRow(
                    tokens=values[offsets[r] : offsets[r + 1]],
                    doc_lens=doc_lens[r],
                    doc_ids=doc_ids[r],
                    columns=columns[r],
                )
                for r in rows
            )
            encoded = encode_shard(packed, name, seq_len, vocab_size)
            format_version = max(format_version, encoded.info.format_version)
            for file_name, data in sorted(encoded.files.items()):
                unit.writer.add_file(file_name, data)
            shards.append(asdict(ShardEntry.from_info(encoded.info)))
            unit.writer.write_table(
                pa.table(
                    {
                        "row_id": [row_ids[r] for r in rows],
                        "shard": [encoded.info.tar_name] * len(rows),
                        "row_in_shard": list(range(len(rows))),
                        "n_tokens": np.diff(offsets)[first : first + len(rows)].astype(np.int32),
                        "doc_ids": [doc_ids[r] for r in rows],
                    },
                    schema=SHARD_ROWS_SCHEMA,
                )
            )
        return UnitResult(
            records_in=len(row_ids),
            extra={
                "shards": len(shards),
                "tokens": int(offsets[-1]) if len(offsets) else 0,
                "shard_entries": shards,
                "format_version": format_version,
            },
        )

    def complete(
        self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        artifacts = ctx.upstream_input.artifacts
        entries = [ShardEntry(**entry) for m in markers for entry in m.extra["shard_entries"]]
        manifest = DatasetManifest(
            name=f"{ctx.settings.dataset_name}/{ctx.batch}",
            version=layout.key_of(output_prefix),
            seq_len=artifacts["seq_len"],
            vocab_size=artifacts["vocab_size"],
            tokenizer_hash=artifacts["tokenizer_sha256"],
            code_version=ctx.pipeline_version,
            shards=entries,
            format_version=max(
                (m.extra.get("format_version", PLAIN_FORMAT_VERSION) for m in markers),
                default=PLAIN_FORMAT_VERSION,
            ),
            extra={"batch": ctx.batch, "packing_efficiency": artifacts.get("packing_efficiency")},
        )
        manifest_rel = layout.in_output(output_prefix, MANIFEST)
        ctx.store.write_bytes(manifest_rel, manifest.to_json().encode())
        return {
            "manifest": manifest_rel,
            "shards": len(entries),
            "rows": manifest.rows,
            "tokens": manifest.tokens,
            "tokenizer_sha256": artifacts["tokenizer_sha256"],
            "vocab_size": artifacts["vocab_size"],
            "seq_len": artifacts["seq_len"],
            "packing_efficiency": artifacts.get("packing_efficiency"),
        }


STAGE = ShardStage()
