"""Cost attribution: the executor meters CPU and bytes per unit; `fm report --cost` sums them per label."""

from __future__ import annotations

import json

from fm_assets.cli.main import main
from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_success, write_ref
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import StageContext
from fm_assets.engine.store import ObjectStore
from fm_assets.reports.cost import cost_by, cost_rows, cost_totals
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.stages.registry import STAGES
from fm_resources.pipeline_config import PipelineConfigResource
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
    for stage in STAGES:
        outcome = run_stage(stage, StageContext(store, batch, settings, side))
        write_ref(store, stage.name, batch, outcome.success, cache_hit=outcome.cache_hit, wall_seconds=0.0)
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
        (b, s.name) for b in (first, second) for s in STAGES[: [s.name for s in STAGES].index(UNTIL) + 1]
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
