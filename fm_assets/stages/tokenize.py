"""tokenize: documents -> token ids with the pinned tokenizer (an EOS token closes every document).

The tokenizer is pinned by the sha256 of its ``tokenizer.json``; that hash is an input of the stage
key, so a new tokenizer recomputes tokenize and everything after it, nothing before it.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import numpy as np
import pyarrow as pa

from fm_assets.stage import Stage, StageContext
from fm_assets.stage_runtime import StageRun, UnitResult, UnitWriter, WorkUnit, iter_parquet_batches
from fm_assets.steps.records import reject_row
from fm_assets.steps.token_records import PROVENANCE_FIELDS, TOKENS_SCHEMA, token_list_array
from fm_resources.tokenizer_registry import PinnedTokenizer, TokenizerRegistry, TokenizerRegistryResource

log = logging.getLogger(__name__)
ENCODE_BATCH_DOCS = 1024
PROVENANCE_NAMES = [f.name for f in PROVENANCE_FIELDS]


def resolve_tokenizer(ctx: StageContext) -> PinnedTokenizer:
    """The configured tokenizer file, else the pinned one, else a BPE trained on this partition's text."""
    if "tokenizer" in ctx.state:
        return ctx.state["tokenizer"]
    registry = TokenizerRegistry(ctx.store)
    resource: TokenizerRegistryResource = ctx.resources.get("tokenizers") or TokenizerRegistryResource()
    if resource.tokenizer_file:
        sha = registry.register_file(resource.tokenizer_file)
        if registry.pinned_sha() != sha:
            registry.pin(sha, origin=f"file:{resource.tokenizer_file}")
    elif (sha := registry.pinned_sha()) is None:
        assert ctx.upstream is not None
        log.info("no tokenizer configured or pinned: training a byte-level BPE on batch %s", ctx.batch)
        sha = registry.train_bpe(_sample_texts(ctx, resource.train_sample_docs), resource.train_vocab_size)
        registry.pin(sha, origin=f"trained:{ctx.batch}")
    ctx.state["tokenizer"] = registry.get(sha)
    return ctx.state["tokenizer"]


def _sample_texts(ctx: StageContext, limit: int):
    def texts():
        for part in ctx.upstream.parts:
            for record_batch in iter_parquet_batches(ctx.store, part, columns=["text"]):
                yield from record_batch["text"].to_pylist()

    return itertools.islice(texts(), limit)


class TokenizeStage(Stage):
    name = "tokenize"
    code_version = "tokenize-v1"
    upstream = "decontaminate"
    description = "Token ids per document with the pinned tokenizer; EOS appended."
    output_schema = TOKENS_SCHEMA

    def config(self, ctx: StageContext) -> dict[str, Any]:
        pinned = resolve_tokenizer(ctx)
        return {"add_eos": pinned.eos_id is not None, "eos_id": pinned.eos_id, "vocab_size": pinned.vocab_size}

    def extra_inputs(self, ctx: StageContext) -> dict[str, str]:
        return {"tokenizer": resolve_tokenizer(ctx).sha256}

    def process(self, ctx: StageContext, run: StageRun, unit: WorkUnit, writer: UnitWriter) -> UnitResult:
        pinned = resolve_tokenizer(ctx)
        records_in = tokens_total = bytes_in = 0
        for part in unit.inputs:
            for record_batch in run.iter_batches(part, batch_size=ENCODE_BATCH_DOCS):
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
                rows = record_batch.to_pylist() if empty else None
                for i in empty:
                    writer.reject(reject_row(rows[i], batch=ctx.batch, stage=self.name, reason="empty_after_tokenize"))
                kept_ids = [doc for doc, k in zip(ids, keep, strict=True) if k]
                kept_lengths = lengths[keep]
                offsets = np.zeros(len(kept_ids) + 1, dtype=np.int64)
                np.cumsum(kept_lengths, out=offsets[1:])
                values = np.concatenate(kept_ids) if kept_ids else np.zeros(0, dtype=np.uint32)
                provenance = record_batch.select(PROVENANCE_NAMES).filter(pa.array(keep))
                table = pa.Table.from_batches([provenance]).append_column(
                    "n_tokens", pa.array(kept_lengths.astype(np.int32))
                ).append_column("tokens", token_list_array(values, offsets))
                writer.write_table(table)
                tokens_total += int(kept_lengths.sum())
        return UnitResult(records_in=records_in, extra={"tokens": tokens_total, "bytes_in": bytes_in})

    def complete(self, ctx: StageContext, run: StageRun, markers: list[dict[str, Any]]) -> dict[str, Any]:
        pinned = resolve_tokenizer(ctx)
        return {"tokenizer_sha256": pinned.sha256, "vocab_size": pinned.vocab_size, "eos_id": pinned.eos_id}


STAGE = TokenizeStage()
