"""tokenize: documents -> token ids with the pinned tokenizer (an EOS token closes every document).

The tokenizer is a side input: the ``tokenizer`` asset pins it by the sha256 of its ``tokenizer.json``,
and this stage only reads the pin. That hash is an input of the stage key, so a new tokenizer recomputes
tokenize and everything after it, nothing before it. The file is parsed once per partition.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from fm_assets.engine.records import UnitMarker
from fm_assets.engine.stage import SideInputs, Stage, StageContext, UnitContext, UnitResult
from fm_assets.side_inputs.tokenizer import PinnedTokenizer, pinned_tokenizer
from fm_assets.transforms.tokens.schemas import PROVENANCE_FIELDS, TOKENS_SCHEMA, token_list_array

ENCODE_BATCH_DOCS = 1024
PROVENANCE_NAMES = [f.name for f in PROVENANCE_FIELDS]


class TokenizeStage(Stage):
    name = "tokenize"
    code_version = "tokenize-v1"
    upstream = "decontaminate"
    description = "Token ids per document with the pinned tokenizer; EOS appended."
    output_schema = TOKENS_SCHEMA
    side_input_assets = ("tokenizer",)

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        pinned = pinned_tokenizer(ctx.store)
        return SideInputs({"tokenizer": pinned.sha256}, pinned)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        pinned: PinnedTokenizer = ctx.side.data
        return {"add_eos": pinned.eos_id is not None, "eos_id": pinned.eos_id, "vocab_size": pinned.vocab_size}

    def process(self, unit: UnitContext) -> UnitResult:
        pinned: PinnedTokenizer = unit.partition.side.data
        records_in = tokens_total = bytes_in = 0
        for part in unit.unit.inputs:
            for record_batch in unit.iter_batches(part, batch_size=ENCODE_BATCH_DOCS):
                texts = record_batch["text"].to_pylist()
                records_in += len(texts)
                bytes_in += sum(len(t.encode("utf-8")) for t in texts)
                encodings = pinned.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
                ids = [np.asarray(e.ids, dtype=np.uint32) for e in encodings]
                if pinned.eos_id is not None:
                    ids = [np.append(doc, np.uint32(pinned.eos_id)) for doc in ids]
                lengths = np.fromiter((len(doc) for doc in ids), dtype=np.int64, count=len(ids))
                empty = [i for i, text in enumerate(texts) if not text.strip()]
                keep = np.ones(len(ids), dtype=bool)
                keep[empty] = False
                if empty:
                    rows = record_batch.to_pylist()
                    for i in empty:
                        unit.reject(rows[i], "empty_after_tokenize")
                kept_ids = [doc for doc, k in zip(ids, keep, strict=True) if k]
                kept_lengths = lengths[keep]
                offsets = np.zeros(len(kept_ids) + 1, dtype=np.int64)
                np.cumsum(kept_lengths, out=offsets[1:])
                values = np.concatenate(kept_ids) if kept_ids else np.zeros(0, dtype=np.uint32)
                provenance = record_batch.select(PROVENANCE_NAMES).filter(pa.array(keep))
                table = (
                    pa.Table.from_batches([provenance])
                    .append_column("n_tokens", pa.array(kept_lengths.astype(np.int32)))
                    .append_column("tokens", token_list_array(values, offsets))
                )
                unit.writer.write_table(table)
                tokens_total += int(kept_lengths.sum())
        return UnitResult(records_in=records_in, extra={"tokens": tokens_total, "bytes_in": bytes_in})

    def complete(self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list[UnitMarker]) -> dict[str, Any]:
        pinned: PinnedTokenizer = ctx.side.data
        return {"tokenizer_sha256": pinned.sha256, "vocab_size": pinned.vocab_size, "eos_id": pinned.eos_id}


STAGE = TokenizeStage()
