"""The eval registry sees real benchmarks: passages planted in a batch are removed and counted per benchmark."""

from __future__ import annotations

import gzip
import json

import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.benchmarks import BenchmarkUnavailableError, load_benchmark, user_jsonl
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.stages.decontaminate import removals_by_benchmark
from fm_assets.stages.registry import TEXT_STAGES
from tests.stages.test_stages_unit import real_texts, write_jsonl


def test_builtin_benchmarks_come_from_the_installed_packages():
    humaneval = load_benchmark("humaneval")
    assert len(humaneval.passages) == 164 and "def " in humaneval.passages[0]
    gsm8k = load_benchmark("lm_eval:gsm8k")
    assert any("15 trees" in passage for passage in gsm8k.passages)
    assert len(load_benchmark("lm_eval:mmlu").passages) > 100
    with pytest.raises(BenchmarkUnavailableError, match="unknown benchmark"):
        load_benchmark("no_such_benchmark")


def test_registry_version_changes_with_any_benchmark(tmp_path):
    base = EvalRegistry(benchmarks=("humaneval",))
    assert (
        base.index().fingerprint()
        != EvalRegistry(benchmarks=("humaneval", "lm_eval:gsm8k")).index().fingerprint()
    )
    user = tmp_path / "mine.jsonl.gz"
    passage = (
        "a private benchmark passage that nobody should train on because it is held out for grading " * 2
    )
    user.write_bytes(gzip.compress(json.dumps({"text": passage, "benchmark": "secret"}).encode()))
    with_user = EvalRegistry(str(user), ("humaneval",))
    assert with_user.index().fingerprint() != base.index().fingerprint()
    assert [b.name for b in user_jsonl(str(user))] == ["user:secret"]
    assert with_user.index().attribute(passage) == {"user:secret": len(passage.split()) - 13 + 1}


def _plant(host: str, passage: str) -> str:
    """``passage`` inserted in the middle of a real document (so the filters still keep it)."""
    paragraphs = host.split("\n")
    middle = len(paragraphs) // 2
    return "\n".join([*paragraphs[:middle], passage, *paragraphs[middle:]])


@pytest.mark.slow
def test_planted_benchmark_passages_are_removed_and_counted_per_benchmark(tmp_path, real_sample):
    planted = {
        "humaneval": load_benchmark("humaneval").passages[7],
        "lm_eval:gsm8k": load_benchmark("lm_eval:gsm8k").passages[2],
        "lm_eval:mmlu": load_benchmark("lm_eval:mmlu").passages[40],
        "lm_eval:bbh": load_benchmark("lm_eval:bbh").passages[10],
    }
    hosts = real_texts(real_sample, 10)
    texts = hosts[:6] + [
        _plant(host, passage) for host, passage in zip(hosts[6:], planted.values(), strict=True)
    ]
    store = ObjectStore(str(tmp_path / "root"))
    batch = land_batch(
        store, write_jsonl(tmp_path / "a.jsonl", texts), source="a", license_id="MIT", namespace="cloud"
    ).batch
    settings = PipelineConfigResource(progress=False, near_dedup=False)
    side = {"blocklists": BlocklistSource(), "eval_registry": EvalRegistry()}
    for stage in TEXT_STAGES:
        outcome = materialize(stage, StageContext(store, batch, settings, side)).outcome
        if stage.name == "decontaminate":
            break
    success = outcome.success
    assert success.counts.records_in == 10, "every planted document reached decontaminate"
    assert success.rejects_by_reason == {"eval_contamination": 4}
    assert removals_by_benchmark(success) == dict.fromkeys(planted, 1)
    assert success.counts.records_in == success.counts.records_out + success.counts.records_rejected


def _forget_built_indexes() -> None:
    """As a fresh process: nothing built or loaded yet."""
    from fm_assets.side_inputs import eval_registry

    eval_registry._built_cached.cache_clear()
    eval_registry._STORED.clear()


def test_the_index_is_stored_once_in_the_root_and_loaded_without_parsing_the_benchmarks(
    tmp_path, monkeypatch
):
    from fm_assets.side_inputs import eval_registry
    from fm_assets.side_inputs.eval_index_store import CACHE_PREFIX

    user = tmp_path / "mine.jsonl"
    passage = "a held out grading passage that must never be trained on by anyone at all ever " * 2
    user.write_text(json.dumps({"text": passage}) + "\n")
    registry = EvalRegistry(str(user), ("humaneval", "lm_eval:gsm8k"))
    store = ObjectStore(str(tmp_path / "root"))
    _forget_built_indexes()
    built = registry.built()  # the reference: parsed and built in this process
    _forget_built_indexes()
    stored = registry.built(store)  # builds and stores it
    [entry] = (tmp_path / "root" / CACHE_PREFIX).iterdir()
    assert stored.index.fingerprint() == built.index.fingerprint() and stored.entries == built.entries

    _forget_built_indexes()

    def no_parsing(*args):
        raise AssertionError("the benchmarks were parsed again")

    monkeypatch.setattr(eval_registry, "iter_benchmarks", no_parsing)
    loaded = registry.built(store)
    assert loaded.index.fingerprint() == built.index.fingerprint() and loaded.entries == built.entries
    assert loaded.index.attribute(passage) == built.index.attribute(passage) != {}
    assert registry.spec(store) == {**registry.spec(store), "entries": list(built.entries)}
    monkeypatch.undo()

    # another user file is another registry: another entry, never the stale one
    user.write_text(json.dumps({"text": passage + " and more words to change the n-grams"}) + "\n")
    _forget_built_indexes()
    changed = registry.built(store)
    assert changed.index.fingerprint() != built.index.fingerprint()
    assert len(list((tmp_path / "root" / CACHE_PREFIX).iterdir())) == 2

    # a damaged entry is not trusted: rebuilt from the benchmarks and rewritten
    entry.write_bytes(entry.read_bytes()[:-200])
    user.write_text(json.dumps({"text": passage}) + "\n")
    _forget_built_indexes()
    assert registry.built(store).index.fingerprint() == built.index.fingerprint()
    _forget_built_indexes()
    monkeypatch.setattr(eval_registry, "iter_benchmarks", no_parsing)
    assert registry.built(store).index.fingerprint() == built.index.fingerprint()
