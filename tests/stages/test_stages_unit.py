"""Stage-level behaviour without Dagster: cross-batch exact dedup, tokenizer pinning in the key, provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.refs import read_success
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.reports.report import iter_rejects
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.side_inputs.tokenizer import TokenizerSpec, ensure_pinned
from fm_assets.stages.registry import TEXT_STAGES


def real_texts(sample: dict, count: int) -> list[str]:
    """Documents from the real sample that pass the filters (long enough prose)."""
    texts = []
    for path in sorted(Path(sample["dest"]).rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            text = json.loads(line)["text"]
            if 400 < len(text.split()) < 3000:
                texts.append(text)
    assert len(texts) >= count
    return texts[:count]


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


SIDE_INPUTS = {"blocklists": BlocklistSource(), "eval_registry": EvalRegistry()}


def run_chain(store, batch, settings, tokenizer: TokenizerSpec, until):
    """Run the stages in order as the preprocess job does (the tokenizer asset pins before tokenize)."""
    outcomes = {}
    for stage in TEXT_STAGES:
        if stage.name == "tokenize":
            ensure_pinned(store, tokenizer)
        outcome = materialize(stage, StageContext(store, batch, settings, SIDE_INPUTS)).outcome
        outcomes[stage.name] = outcome
        if stage.name == until:
            break
    return outcomes


@pytest.fixture
def settings():
    return PipelineConfigResource(progress=False, near_dedup=False, seq_len=64, rows_per_shard=4)


def read_docs(store: ObjectStore, batch: str, stage: str) -> list[tuple[str, str]]:
    """(text, doc_id) of ``stage``'s output rows for ``batch``, in part and row order."""
    rows = []
    for part in read_success(store, stage, batch).parts:
        table = pq.read_table(store.local_path(part), columns=["text", "doc_id"])
        rows += list(zip(table.column("text").to_pylist(), table.column("doc_id").to_pylist(), strict=True))
    return rows


def test_exact_dedup_across_batches_and_rerun_stability(tmp_path, settings, real_sample):
    texts = real_texts(real_sample, 5)
    store = ObjectStore(str(tmp_path / "root"))
    first = land_batch(
        store, write_jsonl(tmp_path / "a.jsonl", texts[:3]), source="a", license_id="MIT", namespace="cloud"
    ).batch
    second = land_batch(
        store,
        write_jsonl(tmp_path / "b.jsonl", [texts[0], texts[1], texts[3], texts[3], texts[4]]),
        source="b",
        license_id="MIT",
        namespace="cloud",
    ).batch
    assert first < second
    run_chain(store, first, settings, TokenizerSpec(), "dedup")
    out = run_chain(store, second, settings, TokenizerSpec(), "dedup")["dedup"]
    assert out.success.rejects_by_reason == {"exact_duplicate_cross_batch": 2, "exact_duplicate": 1}
    assert out.success.counts.records_out == 2
    # each reject names its text's first occurrence: the earlier batch's, else the first one in this batch
    ones = [doc_id for _, doc_id in read_docs(store, first, "dedup")]  # texts 0, 1, 2
    twos = [doc_id for _, doc_id in read_docs(store, second, "filter")]  # texts 0, 1, 3, 3, 4
    assert len(ones) == 3 and len(twos) == 5
    rejects = {
        r["doc_id"]: (r["reason"], r["details"]["duplicate_of"], r["details"]["duplicate_of_batch"])
        for r in iter_rejects(store, second, "dedup")
    }
    assert rejects == {
        twos[0]: ("exact_duplicate_cross_batch", ones[0], first),
        twos[1]: ("exact_duplicate_cross_batch", ones[1], first),
        twos[3]: ("exact_duplicate", twos[2], second),
    }
    # the kept-keys index: this batch's survivors in row order, what later batches are checked against
    kept = pq.read_table(store.local_path(out.success.artifacts["kept_hashes"]))
    assert kept.column("doc_id").to_pylist() == [twos[2], twos[4]]
    assert out.success.inputs[f"dedup:{first}"] == read_success(store, "dedup", first).data_version
    again = run_stage(TEXT_STAGES[4], StageContext(store, second, settings, SIDE_INPUTS))
    assert again.cache_hit and again.data_version == out.data_version


def test_tokenizer_is_pinned_into_the_key_and_provenance_reaches_shards(
    tmp_path, settings, tokenizer_file, real_sample
):
    store = ObjectStore(str(tmp_path / "root"))
    texts = real_texts(real_sample, 6)
    batch = land_batch(
        store, write_jsonl(tmp_path / "a.jsonl", texts), source="a", license_id="MIT", namespace="cloud"
    ).batch
    trained = run_chain(
        store, batch, settings, TokenizerSpec(), "shard"
    )  # no tokenizer given: one is trained and pinned
    pinned = store.read_json("tokenizers/pinned.json")
    assert (
        pinned["origin"].startswith("trained:")
        and trained["tokenize"].success.inputs["tokenizer"] == pinned["sha256"]
    )

    given = run_chain(
        store,
        batch,
        settings,
        TokenizerSpec(tokenizer_file=str(tokenizer_file)),
        "shard",
    )
    assert given["decontaminate"].cache_hit  # nothing before tokenize recomputes
    assert not given["tokenize"].cache_hit and given["tokenize"].key != trained["tokenize"].key
    assert not given["shard"].cache_hit

    # every packed row points back at landed records (cas hash prefix + record index)
    land = read_success(store, "land", batch)
    landed_ids = set()
    for part in land.parts:
        landed_ids.update(pq.read_table(store.local_path(part), columns=["doc_id"])["doc_id"].to_pylist())
    shard = read_success(store, "shard", batch)
    for part in shard.parts:
        for doc_ids in pq.read_table(store.local_path(part), columns=["doc_ids"])["doc_ids"].to_pylist():
            assert doc_ids and all(doc_id.split("@")[0] in landed_ids for doc_id in doc_ids)
