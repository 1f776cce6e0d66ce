"""tokenize: documents -> token ids with the pinned tokenizer (an EOS token closes every document).

The tokenizer is a side input: the ``tokenizer`` asset pins it by the sha256 of its ``tokenizer.json``,
and this stage only reads the pin. That hash is an input of the stage key, so a new tokenizer recomputes
tokenize and everything after it, nothing before it. The file is parsed once per partition.

Encoding runs on the fastest backend that gives the pinned tokenizer's HF ids exactly
(``transforms.tokens.encoder.build_encoder``, chosen once per process and tokenizer in ``prepare``): fastokens,
gigatoken or tiktoken where they reproduce the tokenizer.json, HF ``tokenizers`` otherwise. The ids are the
same by contract, so the backend is not in the stage key; it is recorded per unit (``extra["encoder"]``) and
in the artifacts, and the blocking ``hf_reencode_sample`` check re-encodes a deterministic sample of every
unit with HF and fails on any difference.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fm_assets.engine.background_imports import start_in_background
from fm_assets.engine.checks import CheckOutcome, StageCheck, unit_findings
from fm_assets.engine.records import StageSuccess, UnitMarker
from fm_assets.engine.stage import SideInputs, Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore, iter_parquet_batches
from fm_assets.side_inputs.tokenizer import PinnedTokenizer, TokenizerRegistry, pinned_tokenizer
from fm_assets.transforms.tokens.encoder import EncoderChoice, HFEncoder, encoder_for
from fm_assets.transforms.tokens.flat import Flat, append_token, doc, select_docs
from fm_assets.transforms.tokens.schemas import PROVENANCE_FIELDS, TOKENS_SCHEMA, token_list_array

ENCODE_BATCH_DOCS = 1024
PROVENANCE_NAMES = [f.name for f in PROVENANCE_FIELDS]
# What the check re-encodes with HF per unit. HF encodes ~1.3 M tokens per CPU-second here, the stage's
# compiled encoder ~16 M, so the sample is bounded in tokens, not documents: on a 101 MB held-out batch
# (18 M tokens, 30 units) 16 evenly spaced documents plus each unit's longest were 2 M tokens, a check of
# 1.6 CPU-s beside the stage's 1.1. Now: evenly spaced documents (at most CHECK_SAMPLE_PER_UNIT) while they
# fit CHECK_TOKENS_PER_UNIT, and, on every CHECK_LONG_EVERY_UNITS-th unit, its longest document of at most
# CHECK_LONGEST_MAX_TOKENS (long inputs stay covered in every batch; pages of 1-3 MB are not re-encoded).
CHECK_SAMPLE_PER_UNIT = 16
CHECK_TOKENS_PER_UNIT = 8_192
CHECK_LONG_EVERY_UNITS = 8
CHECK_LONGEST_MAX_TOKENS = 32_768
CHECK_NAME = "hf_reencode_sample"


def sample_positions(rows: int, count: int) -> list[int]:
    """``count`` evenly spaced row positions out of ``rows`` (all of them when there are fewer)."""
    return sorted({(i * rows) // count for i in range(min(count, rows))})


def sample_rows(n_tokens: np.ndarray, *, with_longest: bool) -> set[int]:
    """The rows of one unit (``n_tokens`` per document) the check re-encodes: evenly spaced ones while they fit
    the token budget (the shortest of them when none fits), plus the longest under the cap ``with_longest``."""
    candidates = sample_positions(len(n_tokens), CHECK_SAMPLE_PER_UNIT)
    wanted: set[int] = set()
    budget = CHECK_TOKENS_PER_UNIT
    for position in candidates:
        if n_tokens[position] <= budget:
            wanted.add(position)
            budget -= int(n_tokens[position])
    if candidates and not wanted:
        wanted.add(min(candidates, key=lambda position: (n_tokens[position], position)))
    capped = np.where(n_tokens <= CHECK_LONGEST_MAX_TOKENS, n_tokens, -1)
    if with_longest and len(capped) and capped.max() >= 0:
        wanted.add(int(np.argmax(capped)))
    return wanted


def _written_sample(
    store: ObjectStore, written: list[Path], inputs: list[str], with_longest: bool
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(doc_id -> ids as written, doc_id -> upstream text) for one unit's sampled documents: the ids re-read
    from the part files the unit wrote, the texts from the upstream parts it read (``inputs``)."""
    parts = [pq.ParquetFile(path) for path in written]
    lengths = [part.read(columns=["n_tokens"])["n_tokens"].to_numpy() for part in parts]
    n_tokens = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int32)
    wanted = sample_rows(n_tokens, with_longest=with_longest)
    stored: dict[str, np.ndarray] = {}
    position = 0
    for part in parts:
        for batch in part.iter_batches(columns=["doc_id", "tokens"]):
            for offset in (p - position for p in wanted if position <= p < position + batch.num_rows):
                stored[batch["doc_id"][offset].as_py()] = batch["tokens"][offset].values.to_numpy()
            position += batch.num_rows
    texts: dict[str, str] = {}
    sampled = pa.array(list(stored), pa.string())
    for rel in inputs:
        for batch in iter_parquet_batches(store, rel, columns=["doc_id", "text"]):
            for i in np.flatnonzero(pc.is_in(batch["doc_id"], sampled).to_numpy(zero_copy_only=False)):
                texts[batch["doc_id"][int(i)].as_py()] = batch["text"][int(i)].as_py()
    return stored, texts


_REFERENCES: dict[str, HFEncoder] = {}  # tokenizer sha256 -> HF encoder loaded afresh from the registry


def _reference(store: ObjectStore, sha256: str) -> HFEncoder:
    if sha256 not in _REFERENCES:  # once per process (the units run the check where they run)
        _REFERENCES[sha256] = HFEncoder(TokenizerRegistry(store).get(sha256).tokenizer)
    return _REFERENCES[sha256]


def reencode_written(unit: UnitContext, result: UnitResult, written: list[Path]) -> dict[str, Any]:
    """The unit's part of ``hf_reencode_sample``, run where the unit ran once its parts are written: its
    sampled documents' written ids against the pinned tokenizer loaded afresh from the registry and run
    with HF ``tokenizers`` (EOS appended as the stage does)."""
    pinned: PinnedTokenizer = unit.partition.side.data
    plan: TokenizePlan = unit.prepared
    reference = _reference(unit.store, pinned.sha256)
    with_longest = unit.unit.unit_id in plan.longest_checked
    stored, texts = _written_sample(unit.store, written, list(unit.unit.inputs), with_longest)
    encoder = str(result.extra.get("encoder", "unrecorded"))
    doc_ids = [doc_id for doc_id in stored if doc_id in texts]
    expected: Flat = reference.encode_flat([texts[doc_id] for doc_id in doc_ids])
    if pinned.eos_id is not None:
        expected = append_token(expected, pinned.eos_id)
    mismatched = 0
    first: dict[str, Any] | None = None
    for i, doc_id in enumerate(doc_ids):
        want, got = doc(expected, i), stored[doc_id]
        if np.array_equal(want, got):
            continue
        mismatched += 1
        if first is None:
            n = min(len(want), len(got))
            at = int(np.flatnonzero(want[:n] != got[:n])[0]) if np.any(want[:n] != got[:n]) else n
            first = {"unit": unit.unit.unit_id, "doc_id": doc_id, "encoder": encoder, "token_index": at,
                     "hf_tokens": len(want), "stored_tokens": len(got)}  # fmt: skip
    return {"sampled": len(doc_ids), "mismatched": mismatched, "missing": len(stored) - len(doc_ids),
            "first": first, "encoder": encoder}  # fmt: skip


def check_hf_reencode_sample(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    """A deterministic sample of every unit re-encoded with HF ``tokenizers``; any difference fails.

    Per unit (``reencode_written``, inside the unit once its parts are written): the rows ``sample_rows``
    picks (evenly spaced documents within a token budget; on every ``CHECK_LONG_EVERY_UNITS``-th unit of the
    plan also its longest), their texts read from the upstream parts the unit read, encoded with the pinned
    tokenizer loaded from the registry and compared with the ids the unit wrote. Here: every unit's findings.
    """
    results, unchecked = unit_findings(success, CHECK_NAME)
    encoders = Counter(result["encoder"] for result in results)
    mismatched = sum(result["mismatched"] for result in results)
    missing = sum(result["missing"] for result in results)
    first = next((result["first"] for result in results if result["first"] is not None), None)
    return CheckOutcome(
        mismatched == 0 and missing == 0 and unchecked == 0,
        {
            "units": len(success.units),
            "units_not_checked": unchecked,
            "sampled_docs": sum(result["sampled"] for result in results),
            "mismatched_docs": mismatched,
            "texts_not_found_upstream": missing,
            "encoders_by_unit": dict(sorted(encoders.items())),
            "first_mismatch": first,
        },
        "a deterministic sample of every unit re-encoded with HF tokenizers has exactly the stored ids",
    )


@dataclass(frozen=True)
class TokenizePlan:
    """What ``prepare`` decides for every unit: the encoder, and the units whose check also re-encodes their
    longest document (every ``CHECK_LONG_EVERY_UNITS``-th of the plan, from the first)."""

    choice: EncoderChoice
    longest_checked: frozenset[str]


def choose_encoder_in_background(
    store: ObjectStore, pace: Callable[[], object] | None = None
) -> threading.Thread:
    """Make this process's encoder choice for the pinned tokenizer (``encoder_for``, ~0.1-0.2 s of parsing
    and self-test) on a daemon thread, so that tokenize's ``prepare`` finds it made: ``fm run`` starts it once
    its driver waits on unit workers (``pace``: called first, ``pool.pace_with_driver``). Nothing pinned, or a
    pin that changes before tokenize runs, only means ``prepare`` makes its own choice as before."""

    def choose() -> None:
        if pace is not None:
            pace()
        pinned = pinned_tokenizer(store)
        encoder_for(pinned.sha256, pinned.tokenizer)

    return start_in_background("fm-encoder-choice", choose)


class TokenizeStage(Stage):
    name = "tokenize"
    # the encoder backend changes no id (checked), so no new key; v2: the check's re-encoding runs in the units
    code_version = "tokenize-v2"
    upstream = "decontaminate"
    description = "Token ids per document with the pinned tokenizer; EOS appended."
    output_schema = TOKENS_SCHEMA
    side_input_assets = ("tokenizer",)
    checks = (
        StageCheck(
            CHECK_NAME,
            "a sample of every unit re-encoded with HF tokenizers matches the stored ids",
            check_hf_reencode_sample,
            in_unit=reencode_written,
        ),
    )

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        pinned = pinned_tokenizer(ctx.store)
        return SideInputs({"tokenizer": pinned.sha256}, pinned)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        pinned: PinnedTokenizer = ctx.side.data
        return {
            "add_eos": pinned.eos_id is not None,
            "eos_id": pinned.eos_id,
            "vocab_size": pinned.vocab_size,
        }

    def prepare(self, ctx: StageContext, units: list[WorkUnit], output_prefix: str) -> TokenizePlan:
        pinned: PinnedTokenizer = ctx.side.data
        return TokenizePlan(
            encoder_for(pinned.sha256, pinned.tokenizer),
            frozenset(unit.unit_id for unit in units[::CHECK_LONG_EVERY_UNITS]),
        )

    def process(self, unit: UnitContext) -> UnitResult:
        pinned: PinnedTokenizer = unit.partition.side.data
        choice = unit.prepared.choice
        records_in = tokens_total = bytes_in = 0
        encode_seconds = 0.0
        for part in unit.unit.inputs:
            for record_batch in unit.iter_batches(part, batch_size=ENCODE_BATCH_DOCS):
                texts = record_batch["text"].to_pylist()
                records_in += len(texts)
                bytes_in += int(pc.sum(pc.binary_length(record_batch["text"])).as_py() or 0)
                started = time.perf_counter()
                encoded = choice.encoder.encode_flat(texts)
                encode_seconds += time.perf_counter() - started
                if pinned.eos_id is not None:
                    encoded = append_token(encoded, pinned.eos_id)
                keep = np.fromiter((bool(t) and not t.isspace() for t in texts), dtype=bool, count=len(texts))
                if not keep.all():
                    rows = record_batch.to_pylist()
                    for i in np.flatnonzero(~keep):
                        unit.reject(rows[i], "empty_after_tokenize")
                values, offsets = select_docs(encoded, keep)
                lengths = np.diff(offsets)
                provenance = record_batch.select(PROVENANCE_NAMES).filter(pa.array(keep))
                table = (
                    pa.Table.from_batches([provenance])
                    .append_column("n_tokens", pa.array(lengths.astype(np.int32)))
                    .append_column("tokens", token_list_array(values, offsets))
                )
                unit.writer.write_table(table)
                tokens_total += int(lengths.sum())
        return UnitResult(
            records_in=records_in,
            extra={
                "tokens": tokens_total,
                "bytes_in": bytes_in,
                "encoder": choice.backend,
                "encode_seconds": round(encode_seconds, 4),
            },
        )

    def complete(
        self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        pinned: PinnedTokenizer = ctx.side.data
        choice = prepared.choice
        units_by_encoder = Counter(str(m.extra.get("encoder", "unrecorded")) for m in markers)
        return {
            "tokenizer_sha256": pinned.sha256,
            "vocab_size": pinned.vocab_size,
            "eos_id": pinned.eos_id,
            "encoder": {**choice.describe(), "units": dict(sorted(units_by_encoder.items()))},
        }


STAGE = TokenizeStage()
