"""Cross-batch state under concurrency, through Dagster: two `fm run <batch>` processes at once against one
root and one DAGSTER_HOME, the later batch started first, must write exactly what one serial `fm run` (every
batch in id order) writes in another root; the later batch's steps wait (RetryRequested) for the earlier
batch instead of running without it. And a batch whose earlier batch is never run fails with a message that
says which batch to run, which then succeeds."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from concurrency_helpers import (
    BATCH_IDS,
    assert_no_cross_batch_duplicates,
    build_corpus,
    fingerprint,
    land_corpus,
)
from dagster import DagsterEventType, DagsterInstance, DagsterRun, RunsFilter

from fm_assets.cli.runner import run_batches
from fm_assets.datasets.views import curated_table, recorded_versions
from fm_assets.defs import stage_assets
from fm_assets.defs.resources import build_resources
from fm_assets.engine.refs import read_ref
from fm_assets.engine.store import ObjectStore
from fm_assets.settings import load_settings

log = logging.getLogger(__name__)

FM = str(Path(sys.executable).with_name("fm"))
DAGSTER_YAML = "telemetry:\n  enabled: false\n"


def instance_at(home: Path) -> DagsterInstance:
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DAGSTER_YAML)
    return DagsterInstance.from_config(str(home))


def fm_run(root: Path, home: Path, batches: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FM_ROOT": str(root), "DAGSTER_HOME": str(home)}
    with open(log_path, "wb") as out:
        return subprocess.Popen([FM, "run", *batches], env=env, stdout=out, stderr=subprocess.STDOUT)


def runs_of(instance: DagsterInstance, batch: str) -> list[DagsterRun]:
    return list(
        instance.get_runs(filters=RunsFilter(job_name="preprocess", tags={"dagster/partition": batch}))
    )


def retried_steps(instance: DagsterInstance, batch: str) -> set[str]:
    """Step keys of ``batch``'s preprocess runs that went up for retry."""
    steps = set()
    for run in runs_of(instance, batch):
        for entry in instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY):
            if entry.step_key:
                steps.add(entry.step_key)
    return steps


def wait_for(proc: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    try:
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{log_path.read_text()[-4000:]}"


def release_state(root: Path, home: Path) -> tuple[str, dict[str, str]]:
    """(LATEST dataset version, batch -> decontaminate version recorded in the Iceberg table)."""
    settings = load_settings(root=str(root), dagster_home=str(home))
    catalog = build_resources(settings)["iceberg"].catalog()
    latest = ObjectStore(str(root)).read_json(f"datasets/{settings.dataset_name}/LATEST.json")["version"]
    return latest, recorded_versions(curated_table(catalog))


@pytest.fixture
def trained_tokenizer_env(fm_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """fm_env without a configured tokenizer (the tokenizer asset trains one) and a lenient packing floor
    (the batches are small)."""
    monkeypatch.delenv("FM_TOKENIZER_FILE", raising=False)
    monkeypatch.setenv("FM_TOKENIZER_VOCAB_SIZE", "512")
    monkeypatch.setenv("FM_MIN_PACKING_EFFICIENCY", "0.5")
    monkeypatch.setenv("FM_DAGSTER_LOG_LEVEL", "ERROR")
    return fm_env


@pytest.mark.slow
@pytest.mark.spark
def test_two_fm_runs_at_once_later_batch_first_equal_serial(
    trained_tokenizer_env: Path, real_sample: dict, tmp_path: Path
) -> None:
    first, second = BATCH_IDS[:2]
    corpus = build_corpus(real_sample, batches=2)
    serial_root, serial_home = tmp_path / "serial_root", tmp_path / "serial_home"
    root, home = trained_tokenizer_env, tmp_path / "dagster_home"
    land_corpus(serial_root, corpus, tmp_path)
    store = land_corpus(root, corpus, tmp_path)
    instance = instance_at(home)
    instance_at(serial_home)

    started = time.perf_counter()
    serial = fm_run(serial_root, serial_home, [], tmp_path / "serial.log")  # every batch, in id order
    later = fm_run(root, home, [second], tmp_path / "second.log")
    # start the earlier batch only once the later one is waiting for it (its dedup step went up for retry)
    deadline = time.monotonic() + 400
    while "dedup" not in retried_steps(instance, second):
        assert later.poll() is None, (tmp_path / "second.log").read_text()[-4000:]
        assert time.monotonic() < deadline, "the later batch never waited for the earlier one"
        time.sleep(1)
    assert read_ref(store, "dedup", first) is None and read_ref(store, "dedup", second) is None
    earlier = fm_run(root, home, [first], tmp_path / "first.log")
    for proc, name in ((earlier, "first"), (later, "second"), (serial, "serial")):
        wait_for(proc, tmp_path / f"{name}.log", timeout=900)
    log.info("serial and concurrent runs took %.0fs", time.perf_counter() - started)

    batches = [first, second]
    serial_fp = fingerprint(ObjectStore(str(serial_root)), batches)
    concurrent_fp = fingerprint(store, batches)
    assert serial_fp.differences(concurrent_fp) == []
    assert store.read_json("tokenizers/pinned.json")["origin"] == f"trained:{first}"
    assert_no_cross_batch_duplicates(store, corpus)
    # the later batch waited for the earlier one (dedup always; tokenizer and near_dedup when it got there first)
    assert "dedup" in retried_steps(instance, second)
    assert retried_steps(instance, first) == set()  # the earliest batch never waits
    assert retried_steps(instance_at(serial_home), second) == set()  # nor does anything run in id order

    # both processes ran the release job: the locked commits leave the same state as the serial run
    latest, versions = release_state(root, home)
    assert (latest, versions) == release_state(serial_root, serial_home)
    assert versions == {b: concurrent_fp.outputs[(b, "decontaminate")][1] for b in batches}


@pytest.mark.slow
def test_earlier_batch_never_run_fails_with_instructions(
    trained_tokenizer_env: Path, real_sample: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FM_NEAR_DEDUP", "0")  # the wait happens at dedup; no Spark needed
    monkeypatch.setattr(stage_assets, "PENDING_FIRST_WAIT_SECONDS", 0.2)
    monkeypatch.setattr(stage_assets, "PENDING_MAX_RETRIES", 2)
    first, second = BATCH_IDS[:2]
    corpus = build_corpus(real_sample, batches=2)
    store = land_corpus(trained_tokenizer_env, corpus, tmp_path)

    failures = run_batches(load_settings(), [second], release=False)
    assert list(failures) == [second]
    message = failures[second]
    # both chains keep cross-batch dedup state (dedup, media_dedup): whichever gave up first names the batch
    assert message.startswith(("dedup:", "media_dedup:")), message
    assert f"fm run {first}" in message and "Gave up after waiting" in message, message
    assert read_ref(store, "dedup", second) is None and read_ref(store, "filter", second) is not None
    assert "dedup" in retried_steps(DagsterInstance.get(), second)

    # doing what the message says works, and `fm run` with no batch runs them in id order
    assert run_batches(load_settings(), release=False) == {}
    assert read_ref(store, "shard", second) is not None
    assert store.read_json("tokenizers/pinned.json")["origin"] == f"trained:{first}"
