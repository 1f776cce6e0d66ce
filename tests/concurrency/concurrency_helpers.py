"""Shared pieces of the concurrency tests: a corpus with planted cross-batch duplicates, landing it under
fixed batch ids, running stage chains through the engine (waiting on ``EarlierBatchPending`` like the
Dagster assets do) and fingerprints of everything the stages wrote."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from fm_assets.engine.hashing import content_hash, sha256_file
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.refs import EarlierBatchPending, read_ref, read_success
from fm_assets.engine.run import StageOutcome
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import PipelineSettings
from fm_assets.side_inputs.tokenizer import TokenizerSpec, ensure_pinned
from fm_assets.stages.registry import CHAIN_NAMES, TEXT_STAGES
from fm_assets.transforms.text.pii import find_pii_spans
from fm_assets.transforms.text.pii_policy import redact

log = logging.getLogger(__name__)

# fixed ids (landing order = id order) so two roots hold the same batches and so the same stage keys
BATCH_IDS: tuple[str, ...] = (
    "20240101T000000000000Z-conc-a",
    "20240102T000000000000Z-conc-b",
    "20240103T000000000000Z-conc-c",
)


def real_texts(sample: dict[str, Any], count: int) -> list[str]:
    """Long prose documents from the real sample (they pass every filter before dedup)."""
    texts = []
    for path in sorted(Path(sample["dest"]).rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line)["text"]
            if 400 < len(text.split()) < 3000:
                texts.append(text)
    assert len(texts) >= count, f"the sample holds {len(texts)} long documents, the test needs {count}"
    return texts[:count]


def near_copy(text: str, salt: int) -> str:
    """A near duplicate of ``text``: a handful of words replaced (Jaccard far above the 0.8 threshold)."""
    words = text.split(" ")
    for index in range(5, len(words), max(len(words) // 4, 1)):
        words[index] = f"edited{salt}x{index}"
    edited = " ".join(words)
    assert edited != text
    return edited


@dataclass
class Corpus:
    """Documents per batch and the planted duplicates: exact (batch, text, batch of the original) and near
    (batch, edited text, batch of the original, original text)."""

    docs: dict[str, list[str]]
    exact: list[tuple[str, str, str]] = field(default_factory=list)
    near: list[tuple[str, str, str, str]] = field(default_factory=list)


def build_corpus(sample: dict[str, Any], batches: int = 3) -> Corpus:
    """Real documents plus exact and near duplicates planted across (and within) batches."""
    t = real_texts(sample, 14)
    a, b, c = BATCH_IDS
    docs = {
        a: [t[0], t[1], t[2], t[3], t[4], t[5]],
        b: [t[6], t[0], t[7], near_copy(t[2], 1), t[8], t[1], t[6], t[9]],  # t[6] twice: within-batch
        c: [t[10], t[6], near_copy(t[7], 2), t[3], t[11], near_copy(t[4], 3), t[12], t[13]],
    }
    exact = [(b, t[0], a), (b, t[1], a), (c, t[6], b), (c, t[3], a)]
    near = [(b, docs[b][3], a, t[2]), (c, docs[c][2], b, t[7]), (c, docs[c][5], a, t[4])]
    kept = BATCH_IDS[:batches]
    return Corpus(
        {k: v for k, v in docs.items() if k in kept},
        [e for e in exact if e[0] in kept and e[2] in kept],
        [n for n in near if n[0] in kept and n[2] in kept],
    )


def land_corpus(root: Path, corpus: Corpus, work: Path) -> ObjectStore:
    """Land every batch of ``corpus`` under its fixed id in a new store at ``root``."""
    store = ObjectStore(str(root))
    for batch, texts in corpus.docs.items():
        folder = work / f"src-{root.name}-{batch}"
        folder.mkdir(parents=True)
        (folder / "docs.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
        land_batch(store, folder, source="conc", license_id="MIT", namespace="cloud", batch_id=batch)
    return store


class PendingLog:
    """Thread-safe record of every ``EarlierBatchPending`` a chain waited on: (batch, stage, missing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, str, tuple[str, ...]]] = []

    def add(self, batch: str, stage: str, missing: list[str]) -> None:
        with self._lock:
            self.events.append((batch, stage, tuple(missing)))

    def stages_of(self, batch: str) -> set[str]:
        with self._lock:
            return {stage for b, stage, _ in self.events if b == batch}


def run_chain_waiting(
    store: ObjectStore,
    batch: str,
    settings: PipelineSettings,
    resources: dict[str, Any],
    tokenizer: TokenizerSpec,
    pending: PendingLog,
    *,
    poll_seconds: float = 0.1,
    timeout_seconds: float = 600.0,
    on_pending: Callable[[str, str], None] | None = None,
) -> dict[str, StageOutcome]:
    """Every stage for ``batch`` in order, as the preprocess job runs them (the tokenizer pin before
    tokenize), retrying a step that raises ``EarlierBatchPending`` as the Dagster assets do."""
    outcomes: dict[str, StageOutcome] = {}
    deadline = time.monotonic() + timeout_seconds
    for stage in TEXT_STAGES:
        while True:
            try:
                if stage.name == "tokenize":
                    ensure_pinned(store, tokenizer)
                outcome = materialize(stage, StageContext(store, batch, settings, resources)).outcome
                break
            except EarlierBatchPending as exc:
                pending.add(batch, stage.name, exc.missing)
                if on_pending is not None:
                    on_pending(batch, stage.name)
                if time.monotonic() > deadline:
                    raise
                time.sleep(poll_seconds)
        outcomes[stage.name] = outcome
    return outcomes


def output_files(store: ObjectStore, prefix: str) -> dict[str, str]:
    """sha256 of every data file of one stage output (not its run records: those carry timings)."""
    base = store.local_path(prefix)
    found = {}
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(base).as_posix()
        if path.is_file() and not rel.startswith("_") and "/_" not in rel:
            found[rel] = sha256_file(path)
    return found


@dataclass(frozen=True)
class Fingerprint:
    """Everything that must match between two roots: per (batch, stage) the output folder (its key), data
    version and file hashes; the pinned tokenizer."""

    outputs: dict[tuple[str, str], tuple[str, str]]
    files: dict[tuple[str, str], dict[str, str]]
    tokenizer: str

    def differences(self, other: Fingerprint) -> list[str]:
        found = []
        for key in sorted(set(self.outputs) | set(other.outputs)):
            if self.outputs.get(key) != other.outputs.get(key):
                found.append(f"{key}: {self.outputs.get(key)} != {other.outputs.get(key)}")
            elif self.files.get(key) != other.files.get(key):
                found.append(f"{key}: files differ")
        if self.tokenizer != other.tokenizer:
            found.append(f"tokenizer {self.tokenizer} != {other.tokenizer}")
        return found


def fingerprint(store: ObjectStore, batches: list[str]) -> Fingerprint:
    outputs, files = {}, {}
    for batch in batches:
        for stage in CHAIN_NAMES["text"]:
            ref = read_ref(store, stage, batch)
            assert ref is not None, f"{stage}[{batch}] has no output"
            outputs[(batch, stage)] = (ref.prefix, ref.data_version)
            files[(batch, stage)] = output_files(store, ref.prefix)
    return Fingerprint(outputs, files, store.read_json("tokenizers/pinned.json")["sha256"])


def stage_texts(store: ObjectStore, stage: str, batch: str) -> list[str]:
    """The texts ``stage`` kept for ``batch``."""
    texts: list[str] = []
    for part in read_success(store, stage, batch).parts:
        texts.extend(pq.read_table(store.local_path(part), columns=["text"])["text"].to_pylist())
    return texts


def as_curated(text: str) -> str:
    """``text`` as the stages after pii_preflag see it under the default PII policy (cloud: redacted)."""
    return redact(text, find_pii_spans(text))


def assert_no_cross_batch_duplicates(store: ObjectStore, corpus: Corpus) -> None:
    """No content hash survives exact dedup twice, and every planted near duplicate is gone after near_dedup
    while its original (in the earlier batch) stays."""
    owner: dict[bytes, str] = {}
    for batch in corpus.docs:
        for text in stage_texts(store, "dedup", batch):
            digest = content_hash(text)
            assert digest not in owner, f"a document of {owner.get(digest)} survived dedup again in {batch}"
            owner[digest] = batch
    for batch, text, original_batch in corpus.exact:
        assert owner[content_hash(as_curated(text))] == original_batch, (batch, original_batch)
    for batch, text, original_batch, original in corpus.near:
        text, original = as_curated(text), as_curated(original)
        assert text in stage_texts(store, "dedup", batch)  # not exact: near_dedup's to remove
        assert text not in stage_texts(store, "near_dedup", batch), f"a near duplicate survived in {batch}"
        assert original in stage_texts(store, "near_dedup", original_batch), (
            "the earlier batch's copy must win"
        )
