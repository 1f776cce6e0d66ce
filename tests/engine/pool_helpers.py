"""Shared pieces of the unit-pool tests: a real stage chain on the sample, fingerprints of stage outputs,
filter variants that fail, cheat or die in one unit, and near_dedup with a lower in-process threshold. They
live in a module (not in a test function) because a worker process imports a stage's class by reference."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine import layout
from fm_assets.engine.landing import land_batch
from fm_assets.engine.materialize import materialize
from fm_assets.engine.records import UnitMarker
from fm_assets.engine.refs import read_success
from fm_assets.engine.run import StageOutcome
from fm_assets.engine.stage import StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.engine.verdict import Verdict
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.stages.filter import FilterStage
from fm_assets.stages.near_dedup import NearDedupStage
from fm_assets.stages.registry import TEXT_STAGES
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

BATCH = "b-pool"
CHAIN = ("land", "validate", "pii_preflag", "filter")
# run-dependent fields, the only ones allowed to differ between runs: wall-clock time and cost metering (CPU
# seconds; bytes stored, which include the unit markers holding those timings)
TIMING_FIELDS = ("seconds", "cpu_seconds", "cost")


def side_resources(**extra: Any) -> dict[str, Any]:
    return {"blocklists": BlocklistSource(), "eval_registry": EvalRegistry(), **extra}


def settings(**overrides: Any) -> PipelineConfigResource:
    """Small FM-like settings: several units per stage (one land unit per file, 8 records per land part), no
    Spark near-dup."""
    return PipelineConfigResource(
        **{"progress": False, "near_dedup": False, "land_rows_per_part": 8, "land_unit_bytes": 1, **overrides}
    )


def land_sample(root: Path, sample: dict) -> ObjectStore:
    # imported here: this module is also shipped to Spark executors and subprocesses, which have only its folder
    from sample_licence import package_licence

    store = ObjectStore(str(root))
    dest = Path(sample["dest"])
    licence = package_licence(
        dest / sorted(sample["packages"])[0]
    )  # the other packages' records: quarantined
    land_batch(store, dest, source="sample", license_id=licence, namespace="cloud", batch_id=BATCH)
    return store


def land_planted(root: Path, bases: int) -> ObjectStore:
    """Land ``bases`` real-text documents, each with its planted near-duplicates (tests/spark_planted.py),
    as ``BATCH``."""
    import json

    from spark_planted import planted_corpus  # imported here, as above

    corpus = planted_corpus(bases, seed=3)
    src = root.parent / f"{root.name}-planted"
    src.mkdir(parents=True)
    (src / "docs.jsonl").write_text(
        "".join(
            json.dumps({"text": text, "url": f"https://docs.example.org/{doc_id}"}) + "\n"
            for doc_id, text in zip(corpus.doc_ids, corpus.texts, strict=True)
        )
    )
    store = ObjectStore(str(root))
    land_batch(store, src, source="planted", license_id="CC-BY-SA-3.0", namespace="cloud", batch_id=BATCH)
    return store


def run_chain(
    store: ObjectStore,
    config: PipelineConfigResource,
    until: str = "filter",
    resources: dict[str, Any] | None = None,
) -> dict[str, StageOutcome]:
    """Run the stages in order up to ``until`` as the preprocess job does (refs written after each)."""
    outcomes = {}
    for stage in TEXT_STAGES:
        outcome = materialize(
            stage, StageContext(store, BATCH, config, resources or side_resources())
        ).outcome
        outcomes[stage.name] = outcome
        if stage.name == until:
            break
    return outcomes


def run_one(store: ObjectStore, stage: Any, config: PipelineConfigResource, **resources: Any) -> StageOutcome:
    """Run one stage (its upstream already run) and point its ref at the output."""
    outcome = materialize(stage, StageContext(store, BATCH, config, side_resources(**resources))).outcome
    return outcome


def without_timing(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in TIMING_FIELDS}


def fingerprint(store: ObjectStore, stage: str) -> dict[str, Any]:
    """Everything a stage output is: _SUCCESS.json and every unit marker (timings aside), and the sha256 of
    every file the markers list, read back from the store."""
    success = read_success(store, stage, BATCH)
    markers = {}
    files = {}
    for unit in success.units:
        marker = store.read_json(layout.unit_marker(success.prefix, unit))
        markers[unit] = without_timing(marker)
        for name in marker["files"]:
            files[name] = hashlib.sha256(store.read_bytes(layout.in_output(success.prefix, name))).hexdigest()
    return {
        "success": without_timing(store.read_json(layout.success_marker(success.prefix))),
        "markers": markers,
        "files": files,
        "data_version": success.data_version,
    }


def committed_units(store: ObjectStore, prefix: str) -> list[str]:
    return sorted(Path(p).stem for p in store.list(f"{prefix}/_units"))


def explode_in_unit(unit_id: str) -> None:
    raise ValueError(f"planted failure while processing {unit_id}")


class FlakyFilter(FilterStage):
    """The real filter (same name, code version, config: same key), except one unit raises."""

    fail_unit: str = ""

    def process(self, unit: UnitContext) -> UnitResult:
        if unit.unit.unit_id == self.fail_unit:
            explode_in_unit(unit.unit.unit_id)
        return super().process(unit)


class SaltedFilter(FilterStage):
    """The filter with different output under the same key: impure code as the contract sees it."""

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        verdict = super().judge(ctx, record, metrics)
        if verdict.keep and verdict.record is not None:
            verdict = Verdict.kept({**verdict.record, "text": verdict.record["text"] + " (salted)"})
        return verdict


class LeakyFilter(FilterStage):
    """Loses a record in its accounting: a StageContractError in the worker."""

    def process(self, unit: UnitContext) -> UnitResult:
        result = super().process(unit)
        return UnitResult(records_in=result.records_in + 1, extra=result.extra)


class DyingFilter(FilterStage):
    """The worker running ``die_unit`` is SIGKILLed (out-of-memory killer, ...)."""

    die_unit: str = ""

    def process(self, unit: UnitContext) -> UnitResult:
        if unit.unit.unit_id == self.die_unit:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().process(unit)


class SlowFilter(FilterStage):
    """The real filter, slowed down per unit, recording which process ran it (the kill -9 test)."""

    pid_dir: str = ""
    delay: float = 0.4

    def process(self, unit: UnitContext) -> UnitResult:
        Path(self.pid_dir, str(os.getpid())).touch()
        time.sleep(self.delay)
        return super().process(unit)


class ThresholdNearDedup(NearDedupStage):
    """The real near_dedup (same key: where it runs is not in it) whose batches of ``local_max_docs``
    documents or more go to its Spark path rather than in-process."""

    local_max_docs: int = 0

    def dedup_config(self, ctx: StageContext) -> NearDedupConfig:
        return dataclasses.replace(super().dedup_config(ctx), local_max_docs=self.local_max_docs)


def empty_marker(unit: WorkUnit, *, inputs: list[str], extra: dict[str, Any]) -> UnitMarker:
    """The marker of a toy unit that writes nothing (its ``extra`` reports what the test looks at)."""
    return UnitMarker(
        unit=unit.unit_id,
        inputs=inputs,
        files={},
        parts=[],
        records_in=0,
        records_out=0,
        rows_written=0,
        records_rejected=0,
        rejects_by_reason={},
        extra=extra,
        bytes_out=0,
        seconds=0.0,
    )


class EchoJob:
    """A toy unit job for the pool API: a marker per unit, a failure for unit ``bad``."""

    label = "echo[b]"

    def compute(self, unit: WorkUnit, *, commit: bool) -> UnitMarker:
        if unit.unit_id == "bad":
            explode_in_unit(unit.unit_id)
        return empty_marker(unit, inputs=list(unit.inputs), extra={"pid": os.getpid(), "commit": commit})


def units_then_return(pids: Any) -> None:
    """The target of a ``spawn`` child, as Dagster's code server runs a run worker: run units on the shared
    pool, report the worker pids on ``pids`` (a queue) and return, leaving the pool idle."""
    from fm_assets.engine.pool import UnitTask, dump_job, run_on_processes

    payload = dump_job(EchoJob())
    assert isinstance(payload, bytes)
    markers: list[UnitMarker] = []
    tasks = [UnitTask(i, WorkUnit(f"u{i}", ())) for i in range(6)]
    run_on_processes(
        "echo[b]", payload, tasks, 2, lambda task, marker: markers.append(marker), lambda n: None
    )
    pids.put(sorted({marker.extra["pid"] for marker in markers}))


HEAVY_MODULES = ("pyspark", "great_expectations", "pyiceberg", "lance", "av", "matplotlib", "scipy.signal")


class ModulesJob:
    """A toy unit job that reports which heavy modules (and the test's stand-in ``colorsys``) its worker
    had imported before the unit ran."""

    label = "modules[b]"

    def compute(self, unit: WorkUnit, *, commit: bool) -> UnitMarker:
        loaded = [name for name in (*HEAVY_MODULES, "colorsys") if name in sys.modules]
        return empty_marker(unit, inputs=[], extra={"pid": os.getpid(), "loaded": loaded})


def pid_and_square(value: int) -> tuple[int, int]:
    """(this process's id, value squared): which process ran a ``map_on_workers`` item, and its result."""
    return os.getpid(), value * value


def pid_after_sleeping(seconds: float) -> int:
    """Sleep ``seconds``, then this process's id: a ``map_on_workers`` task of a known length."""
    time.sleep(seconds)
    return os.getpid()
