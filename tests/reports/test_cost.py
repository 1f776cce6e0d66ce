"""Cost attribution: the executor meters CPU and bytes per unit; `fm report --cost` sums them per label."""

from __future__ import annotations

import json

import pytest

from fm_assets.cli.main import main
from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.refs import read_success
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.reports.cost import cost_by, cost_rows, cost_totals, with_aux_cost
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.stages.registry import TEXT_STAGES
from tests.stages.test_stages_unit import real_texts, write_jsonl

UNTIL = "normalize"


def _land_and_run(store: ObjectStore, tmp_path, texts: list[str], source: str, namespace: str) -> str:
    batch = land_batch(
        store,
        write_jsonl(tmp_path / f"{source}.jsonl", texts),
        source=source,
        license_id="MIT",
        namespace=namespace,
    ).batch
    settings = PipelineConfigResource(progress=False, near_dedup=False)
    side = {"blocklists": BlocklistSource(), "eval_registry": EvalRegistry()}
    for stage in TEXT_STAGES:
        materialize(stage, StageContext(store, batch, settings, side))
        if stage.name == UNTIL:
            break
    return batch


def test_stage_outputs_record_their_cost_and_report_sums_it_per_label(
    tmp_path, real_sample, capsys, monkeypatch
):
    store = ObjectStore(str(tmp_path / "root"))
    texts = real_texts(real_sample, 6)
    first = _land_and_run(store, tmp_path, texts[:3], "docs-a", "cloud")
    second = _land_and_run(store, tmp_path, texts[3:], "docs-b", "on_device")

    validate = read_success(store, "validate", first)
    land = read_success(store, "land", first)
    # validate reads exactly land's part files, and stores exactly the files it lists
    assert validate.cost["bytes_read"] == sum(land.files[p.rsplit("/", 1)[1]]["bytes"] for p in land.parts)
    assert validate.cost["bytes_stored"] == sum(entry["bytes"] for entry in validate.files.values())
    assert 0 < validate.cost["bytes_written"] <= validate.cost["bytes_stored"]
    assert validate.cost["cpu_seconds"] > 0

    rows = cost_rows(store, teams={"docs-a": "platform"})
    assert {(r["batch"], r["stage"]) for r in rows} == {
        (b, s.name)
        for b in (first, second)
        for s in TEXT_STAGES[: [s.name for s in TEXT_STAGES].index(UNTIL) + 1]
    }
    assert {r["team"] for r in rows if r["batch"] == first} == {"platform"}
    assert {r["team"] for r in rows if r["batch"] == second} == {"unassigned"}
    by_namespace = {(r["namespace"], r["stage"]): r for r in cost_by(rows, "namespace")}
    assert by_namespace[("cloud", "validate")]["bytes_read"] == validate.cost["bytes_read"]
    totals = {r["namespace"]: r for r in cost_totals(rows, "namespace")}
    assert totals["cloud"]["bytes_stored"] == sum(
        r["bytes_stored"] for r in rows if r["namespace"] == "cloud"
    )

    monkeypatch.setenv("FM_COST_TEAMS", json.dumps({"docs-a": "platform"}))
    assert main(["--root", store.root, "report", "--cost", "--by", "team", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {(r["team"], r["stage"]) for r in printed} == {(r["team"], r["stage"]) for r in rows}


def test_cost_report_covers_the_media_chain(tmp_path, capsys):
    """`fm report --cost` reports every stage of the media chain too, with what each one metered."""
    from media_batch import write_media_batch

    from fm_assets.stages.names import ALL_STAGE_NAMES, CHAIN_NAMES
    from tests.stages.media.test_media_stages import pin_tokenizer, run_media_chain

    store = ObjectStore(str(tmp_path / "root"))
    pin_tokenizer(store)
    batch = land_batch(
        store, write_media_batch(tmp_path / "media"), source="gen", license_id="CC-BY-4.0", namespace="cloud"
    ).batch
    settings = PipelineConfigResource(progress=False, rows_per_shard=4, land_unit_bytes=200_000)
    outcomes = run_media_chain(store, batch, settings)

    assert main(["--root", store.root, "report", "--cost", "--by", "source", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    media = {r["stage"]: r for r in printed if r["chain"] == "media"}
    assert list(media) == CHAIN_NAMES["media"]  # every media stage, in chain order
    assert [r["stage"] for r in printed] == [s for s in ALL_STAGE_NAMES if s in {r["stage"] for r in printed}]
    for stage, outcome in outcomes.items():
        cost = with_aux_cost(store, outcome.success)  # media_dedup's keys are units of its `keys` output
        assert media[stage]["source"] == "gen"
        assert media[stage]["bytes_stored"] == cost["bytes_stored"] > 0, stage
        assert media[stage]["bytes_read"] == cost["bytes_read"], stage
    assert media["media_normalize"]["cpu_seconds"] > 0  # decoding and resizing is metered work
    own = outcomes["media_dedup"].success.cost["bytes_stored"]  # the keys output's files count too
    assert media["media_dedup"]["bytes_stored"] > own
    # the text release's card asks for the text chain only (none of it ran here)
    assert {r["chain"] for r in cost_rows(store)} == {"media"}
    assert cost_rows(store, chains=("text",)) == []
    with pytest.raises(ValueError, match="unknown chain 'multimodal'"):
        cost_rows(store, chains=("multimodal",))
