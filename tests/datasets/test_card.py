"""The dataset card: card.md + card.json + SVG plots for a released version, and `fm card VERSION`."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest

from fm_assets.cli.main import main
from fm_assets.datasets.release import assemble_release
from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine import layout
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.benchmarks import load_benchmark
from fm_assets.side_inputs.tokenizer import TokenizerSpec
from tests.stages.test_stages_unit import real_texts, run_chain, write_jsonl

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.slow
def test_release_writes_a_card_people_read(tmp_path, real_sample, tokenizer_file, capsys):
    texts = real_texts(real_sample, 10)
    gsm8k = load_benchmark("lm_eval:gsm8k").passages[1]
    texts[8] = texts[8] + "\n" + gsm8k  # one planted benchmark passage
    texts[9] = texts[9] + "\nQuestions to jane.roe@acme-mail.de please."  # one PII document (redacted)
    texts.append(texts[0])  # one exact duplicate
    store = ObjectStore(str(tmp_path / "root"))
    batch = land_batch(
        store, write_jsonl(tmp_path / "a.jsonl", texts), source="docs", license_id="MIT", namespace="cloud"
    ).batch
    settings = PipelineConfigResource(progress=False, near_dedup=False, seq_len=128, rows_per_shard=16)
    run_chain(store, batch, settings, TokenizerSpec(tokenizer_file=str(tokenizer_file)), "shard")

    release = assemble_release(store, "cards")
    folder = layout.dataset_dir("cards", release["version"])
    card = store.read_json(layout.dataset_card("cards", release["version"]))
    assert card["sources"] == [
        {
            "source": "docs", "license": "MIT", "namespace": "cloud", "batches": 1, "documents_landed": 11,
            "documents_in_shards": card["stages"][-2]["records_out"], "tokens": card["tokens"],
        }
    ]  # fmt: skip
    stages = {row["stage"]: row for row in card["stages"]}
    assert stages["dedup"]["top_reasons"] == [["exact_duplicate", 1]]
    assert card["duplicates"]["exact_duplicate_rate"] == pytest.approx(1 / stages["dedup"]["records_in"])
    removed = {b["name"]: b["removed"] for b in card["contamination"]["benchmarks"]}
    assert removed["lm_eval:gsm8k"] == 1 and card["contamination"]["documents_removed"] == 1
    assert all(len(b["sha256"]) == 64 for b in card["contamination"]["benchmarks"])
    flagged = card["pii"]["documents_flagged"]  # the planted one and any the real pages hold
    assert flagged >= 1 and card["pii"]["decisions_by_action"] == {"redact": flagged}
    assert sum(card["languages"].values()) == stages["decontaminate"]["records_out"]
    assert sum(card["quality"]["curated_histogram_deciles"]) == stages["decontaminate"]["records_out"]
    assert 0 < card["packing_efficiency"] <= 1
    assert card["cost"]["by_stage"][0]["stage"] == "land" and card["cost"]["by_stage"][0]["cpu_seconds"] > 0
    assert card["known_limitations"]

    markdown = store.read_bytes(f"{folder}/card.md").decode()
    for plot in card["plots"]:
        assert ElementTree.fromstring(store.read_bytes(f"{folder}/{plot}")).tag == f"{SVG}svg"
        assert f"]({plot})" in markdown
    assert {"stage_funnel.svg", "languages.svg", "quality_scores.svg", "tokens_by_source.svg"} == set(
        card["plots"]
    )
    funnel = ElementTree.fromstring(store.read_bytes(f"{folder}/stage_funnel.svg"))
    bars = [
        rect.findtext(f"{SVG}title")
        for rect in funnel.iter(f"{SVG}rect")
        if rect.find(f"{SVG}title") is not None
    ]
    kept = [row for row in card["stages"] if row["stage"] not in ("pack", "shard")]
    assert bars == [f"{row['stage']}: {row['records_out']:,}" for row in kept]
    assert "| lm_eval:gsm8k |" in markdown and card["tokenizer_sha256"] in markdown

    assert main(["--root", store.root, "card", release["version"][:8]]) == 0
    assert "# Dataset card: cards" in capsys.readouterr().out
    assert main(["--root", store.root, "card", release["version"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == release["version"]
    assert main(["--root", store.root, "card", "nosuchversion"]) == 2

    # the legal report carries the same evidence per batch
    report = tmp_path / "audit.md"
    assert main(["--root", store.root, "audit", "--format", "md", "--output", str(report)]) == 0
    markdown = report.read_text()
    assert "## Personal data: policy decisions" in markdown and "## Quality filtering" in markdown
    lines = markdown.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("| batch | eval index |"))
    header, row = lines[at], lines[at + 2]
    assert row.split(" | ")[header.split(" | ").index("lm_eval:gsm8k")] == "1"
    capsys.readouterr()
    assert main(["--root", store.root, "audit", "--format", "json"]) == 0
    evidence = json.loads(capsys.readouterr().out)["evidence"][batch]
    assert evidence["pii"]["every_decision_logged"] and evidence["pii"]["decisions_logged"] == flagged
    assert evidence["contamination"]["removed_by_benchmark"] == {"lm_eval:gsm8k": 1}
