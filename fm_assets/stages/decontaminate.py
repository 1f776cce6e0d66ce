"""decontaminate: drop documents that share word n-grams with the evaluation sets (mandatory before shards).

The eval registry is a side input (``side_inputs.eval_registry``): its index fingerprint is in the stage
key, so a new eval set recomputes decontaminate and everything after it. Each removal names the benchmarks
it overlaps (reject details) and is counted per benchmark (``eval_removed:<benchmark>`` in the stage's
extra), which the card and the audit report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from fm_assets.engine.checks import CheckOutcome, StageCheck, unit_findings
from fm_assets.engine.kinds.record import RecordStage
from fm_assets.engine.records import StageSuccess, UnitMarker
from fm_assets.engine.stage import SideInputs, StageContext, UnitContext, UnitResult
from fm_assets.engine.store import ObjectStore
from fm_assets.engine.verdict import KEEP, Verdict
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.transforms.text.decontam import BenchmarkIndex

EVAL_REGISTRY = "eval_registry"
REMOVED_PREFIX = "eval_removed:"  # + benchmark name: documents removed that overlap that benchmark


# at most this many kept documents re-scanned per written part by the check (the stage scanned them all); at
# 64 the re-scan cost a third of the stage's own CPU (1.7 of 5.1 s on an 87 MB held-out batch), at 16 a tenth
CHECK_SAMPLE_PER_PART = 16
CHECK_NAME = "no_eval_contamination"


def rescan_sample(part: pq.ParquetFile, index: BenchmarkIndex, min_matches: int) -> tuple[int, int]:
    """(documents re-scanned, documents still matching) of one written part's evenly spread sample."""
    rows = part.metadata.num_rows
    step = max(1, -(-rows // CHECK_SAMPLE_PER_PART))  # rounded up: never more than the sample size
    leaked = scanned = position = 0
    for record_batch in part.iter_batches(columns=["text"]):
        texts = record_batch["text"].to_pylist()
        for offset in range((-position) % step, len(texts), step):
            scanned += 1
            leaked += index.check(texts[offset])[0] >= min_matches
        position += len(texts)
    return scanned, leaked


def rescan_written(unit: UnitContext, result: UnitResult, written: list[Path]) -> dict[str, int]:
    """The unit's part of ``no_eval_contamination``: each part it wrote, re-read from the written file, has
    a sample re-scanned against the index the stage used."""
    if not unit.settings.decontaminate:
        return {"rescanned": 0, "matching": 0}
    index: BenchmarkIndex = unit.partition.side.data
    scanned = leaked = 0
    for path in written:
        part_scanned, part_leaked = rescan_sample(
            pq.ParquetFile(path), index, unit.settings.decontam_min_matches
        )
        scanned += part_scanned
        leaked += part_leaked
    return {"rescanned": scanned, "matching": leaked}


def check_no_contamination(store: ObjectStore, success: StageSuccess, stage: Any) -> CheckOutcome:
    """Independent re-scan of a deterministic sample of kept documents (blocking: leakage must not reach shards).

    The stage already scanned every document; each unit, once its parts are written, re-reads them and
    re-scans up to ``CHECK_SAMPLE_PER_PART`` documents per part, spread evenly (``rescan_written``, where the
    unit ran). Passes when no re-scanned document matches, every unit re-scanned its parts, the stage scanned
    every document it read, and the eval registry still has the index the stage used.
    """
    if not success.config["enabled"]:
        return CheckOutcome(True, {"enabled": False}, "decontamination disabled by configuration")
    index = EvalRegistry.from_spec(success.artifacts.get("eval_registry")).index(store)
    if index.fingerprint() != success.inputs.get("eval_index"):
        return CheckOutcome(
            False,
            {"eval_index": index.fingerprint(), "stage_eval_index": success.inputs.get("eval_index")},
            "the eval registry changed since this output was made; re-materialize decontaminate",
        )
    findings, unchecked = unit_findings(success, CHECK_NAME)
    scanned = sum(finding["rescanned"] for finding in findings)
    leaked = sum(finding["matching"] for finding in findings)
    removed = success.rejects_by_reason.get("eval_contamination", 0)
    stage_scanned = success.extra.get("eval_scanned_docs", 0)
    return CheckOutcome(
        leaked == 0 and unchecked == 0 and stage_scanned == success.counts.records_in,
        {
            "stage_scanned": stage_scanned,
            "sample_rescanned": scanned,
            "contaminated_in_sample": leaked,
            "units_not_rescanned": unchecked,
            "removed": removed,
            "eval_index": index.fingerprint(),
            "removed_by_benchmark": removals_by_benchmark(success),
        },
        "every document was scanned by the stage and a re-scanned sample of kept documents shares no eval n-gram",
    )


def removals_by_benchmark(success: StageSuccess) -> dict[str, int]:
    """Documents removed per benchmark (a document overlapping two benchmarks counts for both)."""
    return {
        key.removeprefix(REMOVED_PREFIX): int(value)
        for key, value in sorted(success.extra.items())
        if key.startswith(REMOVED_PREFIX)
    }


class DecontaminateStage(RecordStage):
    name = "decontaminate"
    code_version = "decontam-v3"  # v3: the check's re-scan runs in the units
    upstream = "normalize"
    description = "Eval-set n-gram overlap removal."
    checks = (
        StageCheck(
            CHECK_NAME,
            "kept documents do not overlap the eval sets",
            check_no_contamination,
            in_unit=rescan_written,
        ),
    )
    side_input_assets = ("eval_registry",)

    def config(self, ctx: StageContext) -> dict[str, Any]:
        return {"enabled": ctx.settings.decontaminate, "min_matches": ctx.settings.decontam_min_matches}

    def side_inputs(self, ctx: StageContext) -> SideInputs:
        if not ctx.settings.decontaminate:
            return SideInputs()
        index: BenchmarkIndex = ctx.resource(EVAL_REGISTRY).index(ctx.store)
        return SideInputs({"eval_index": index.fingerprint()}, index)

    def judge(self, ctx: StageContext, record: dict[str, Any], metrics: dict[str, Any]) -> Verdict:
        if not ctx.settings.decontaminate:
            return KEEP
        index: BenchmarkIndex = ctx.side.data
        metrics["eval_scanned_docs"] = metrics.get("eval_scanned_docs", 0) + 1
        matches, fraction = index.check(record["text"])
        if matches < ctx.settings.decontam_min_matches:
            return KEEP
        benchmarks = index.attribute(record["text"])
        for name in benchmarks:
            metrics[REMOVED_PREFIX + name] = metrics.get(REMOVED_PREFIX + name, 0) + 1
        return Verdict.drop(
            "eval_contamination",
            {"matching_ngrams": matches, "fraction": round(fraction, 6), "benchmarks": benchmarks},
        )

    def complete(
        self, ctx: StageContext, prepared: Any, output_prefix: str, markers: list[UnitMarker]
    ) -> dict[str, Any]:
        if not ctx.settings.decontaminate:
            return {}
        return {"eval_registry": ctx.resource(EVAL_REGISTRY).spec(ctx.store)}


STAGE = DecontaminateStage()
