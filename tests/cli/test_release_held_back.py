"""One poorly packing batch no longer blocks every release: the batch whose chain fails is held back (named,
with the reason, in the card and by `fm run`), the others are released - the same through the Dagster sensor
as through `fm run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import (
    AssetCheckSeverity,
    DagsterEventType,
    DagsterRunStatus,
    RunRequest,
    RunsFilter,
    build_run_status_sensor_context,
)
from sample_licence import package_licence
from tokenizers import Tokenizer

from fm_assets.cli.runner import dagster_instance, run_batches, run_config
from fm_assets.defs.build import build_definitions
from fm_assets.defs.instance import LOCAL_INSTANCE_TEMPLATE, render_instance_config
from fm_assets.defs.sensors import release_after_preprocess
from fm_assets.settings import load_settings

pytestmark = [pytest.mark.slow]
FM = [sys.executable, "-m", "fm_assets.cli.main"]
DOC_TOKENS = 300  # with FM_SEQ_LEN=512 no two documents share a row: every row ~59% full


def _fm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FM, *args], env=dict(os.environ), capture_output=True, text=True, timeout=600)


def _poorly_packing_docs(real_sample, tokenizer_file: Path, dest: Path) -> Path:
    """Real documents cut to ~DOC_TOKENS tokens each: packing cannot fill rows, the pack check must fail."""
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    package = Path(real_sample["dest"]) / sorted(real_sample["packages"])[-1]
    docs = []
    for line in next(package.glob("*.jsonl")).read_text().splitlines():
        ids = tokenizer.encode(json.loads(line)["text"]).ids
        if len(ids) >= DOC_TOKENS + 20:
            docs.append({"text": tokenizer.decode(ids[:DOC_TOKENS])})
    assert len(docs) >= 10, "the sample has too few long documents"
    dest.mkdir()
    (dest / "docs.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    return dest


def _card() -> dict:
    root = Path(os.environ["FM_ROOT"])
    (latest,) = (root / "datasets").glob("*/LATEST.json")
    return json.loads((latest.parent / json.loads(latest.read_text())["version"] / "card.json").read_text())


def test_poor_batch_is_held_back_and_the_good_one_released(fm_env, real_sample, tokenizer_file, tmp_path):
    good_src = Path(real_sample["dest"]) / sorted(real_sample["packages"])[0]
    good = _fm("land", str(good_src), "--source", "good", "--license", package_licence(good_src))
    poor = _fm("land", str(_poorly_packing_docs(real_sample, tokenizer_file, tmp_path / "poor")), "--source",
               "poor", "--license", "MIT")  # fmt: skip
    assert good.returncode == 0 and poor.returncode == 0, good.stderr + poor.stderr
    good_batch, poor_batch = good.stdout.strip(), poor.stdout.strip()

    # the Dagster path: preprocess runs as the landing sensor requests them, then the release sensor's request
    settings = load_settings()
    assert run_batches(settings, [good_batch], release=False) == {}
    failures = run_batches(settings, [poor_batch], release=False)
    assert "packing_efficiency" in failures[poor_batch], failures
    instance = dagster_instance(settings)
    (good_run,) = instance.get_run_records(
        RunsFilter(job_name="preprocess", statuses=[DagsterRunStatus.SUCCESS],
                   tags={"dagster/partition": good_batch})
    )  # fmt: skip
    (success_event,) = instance.get_records_for_run(
        good_run.dagster_run.run_id, of_type=DagsterEventType.RUN_SUCCESS
    ).records
    event = success_event.event_log_entry.dagster_event
    assert event is not None
    request = release_after_preprocess(
        build_run_status_sensor_context(
            sensor_name="release_after_preprocess",
            dagster_event=event,
            dagster_instance=instance,
            dagster_run=good_run.dagster_run,
        )
    )
    assert isinstance(request, RunRequest), request
    release = build_definitions(settings).resolve_job_def("release")
    result = release.execute_in_process(instance=instance, tags=request.tags, run_config=run_config(settings))
    assert result.success
    card = _card()
    assert [b["batch"] for b in card["batches"]] == [good_batch]
    (held,) = card["held_back"]
    assert held["batch"] == poor_batch and "pack's check packing_efficiency failed" in held["reason"], held
    (materialization,) = result.asset_materializations_for_node("dataset_release")
    assert materialization.metadata["held_back"].value == card["held_back"]
    # the held-back batch is a failed (WARN) check on the release, not only metadata and a log line
    (check,) = [
        c for c in result.get_asset_check_evaluations() if c.asset_key.to_user_string() == "dataset_release"
    ]
    assert check.check_name == "no_batch_held_back" and not check.passed
    assert check.severity == AssetCheckSeverity.WARN
    assert [h["batch"] for h in check.metadata["held_back"].value] == [poor_batch]

    # `fm run`: the same release, the held-back batch named with its reason, a non-zero exit
    run = _fm("run")
    assert run.returncode == 1, run.stderr[-3000:]
    assert f"held back {poor_batch}: pack's check packing_efficiency failed" in run.stderr, run.stderr[-3000:]
    assert [b["batch"] for b in _card()["batches"]] == [good_batch]
    assert _card()["held_back"] == card["held_back"]

    # the good batch alone succeeds, but the release it writes still holds the poor one back: exit 1 (README)
    again = _fm("run", good_batch)
    assert again.returncode == 1, again.stderr[-3000:]
    assert f"held back {poor_batch}" in again.stderr
    # and `fm run` left the full local instance config (run queue, pools, run monitoring) for `make ui`
    home = Path(os.environ["DAGSTER_HOME"])
    assert (home / "dagster.yaml").read_text() == render_instance_config(LOCAL_INSTANCE_TEMPLATE, home)

    # the audit headline: a blocking check failed (the batch is held back), apart from warnings
    audit = _fm("audit", "--format", "md", "-o", str(tmp_path / "audit.md"))
    assert audit.returncode in (0, 1), audit.stderr[-2000:]
    headline = next(
        line for line in (tmp_path / "audit.md").read_text().splitlines() if line.startswith("Scope:")
    )
    assert "1 BLOCKING CHECK(S) FAILED" in headline and "held back" in headline, headline
