"""Sensors (both on by default): every new complete landing batch becomes a partition and one ``preprocess``
run; every successful run of this code location that materialized what the release reads requests one
``release`` run.

A quarantine batch is registered but not run until a reviewer promotes it (``fm quarantine promote``): the
landing sensor logs why it skips it, keeps it in its cursor (``review``) and requests its run on the first
tick after the promotion; a rejected one is dropped from the cursor, never run."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    RunStatusSensorContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    run_status_sensor,
    sensor,
)

from fm_assets.compliance.namespaces import split_by_review
from fm_assets.defs.jobs import chain_asset_keys, preprocess_job, release_job
from fm_assets.defs.partitions import BATCH_PARTITIONS_NAME, batch_partitions
from fm_assets.defs.resources.object_store import ObjectStoreResource
from fm_assets.engine.identifiers import is_identifier
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.batch_chains import batch_chains

LANDING_INTERVAL_SECONDS = 30
RELEASE_INTERVAL_SECONDS = 15
# the stages the release assets read (dataset_release: shard; curated_documents: decontaminate;
# documents_lance: decontaminate + tokenize; media_dataset_release and the media views: media_shard): a run
# that materialized one of them changes the release
RELEASE_INPUTS = frozenset({"shard", "decontaminate", "tokenize", "media_shard"})
# a release run in one of these states that was created after a run ended reads that run's output
RELEASE_WILL_INCLUDE = (
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.SUCCESS,
)


def landing_run_key(batch: str) -> str:
    return f"landing-batch:{batch}"


def release_run_key(run_id: str) -> str:
    return f"release-after:{run_id}"


def _digest(names: Iterable[str]) -> str:
    names = list(names)
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:16] if names else ""


@dataclass
class LandingCursor:
    """Where the landing sensor stopped.

    ``last`` is the highest complete batch id handled (ids start with a UTC timestamp, so new batches sort
    after it), ``pending`` the incomplete batches seen (re-checked every tick until ``_batch.json`` appears)
    and ``below`` a digest of the names at or below ``last``: a batch that shows up there later (an S3
    upload that finished after a newer batch, an explicit ``--batch-id``) changes it, and only then is the
    listing reconciled against the registered partitions.
    """

    last: str = ""
    pending: list[str] = field(default_factory=list)
    below: str = ""
    review: list[str] = field(default_factory=list)  # registered quarantine batches awaiting review

    @classmethod
    def parse(cls, raw: str | None) -> LandingCursor:
        if not raw:
            return cls()
        obj = json.loads(raw)
        return cls(
            last=obj.get("last", ""),
            pending=list(obj.get("pending", [])),
            below=obj.get("below", ""),
            review=list(obj.get("review", [])),
        )

    def dump(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class LandingScan:
    new: list[str]  # complete batches that are not partitions yet, in id order
    cursor: LandingCursor
    checked: int  # how many batches' _batch.json was looked up


def scan_landing(store: ObjectStore, cursor: LandingCursor, known: Callable[[], set[str]]) -> LandingScan:
    """New complete batches since ``cursor``; ``known()`` returns the registered partitions (called at most
    once, and only when there is something to compare)."""
    # a folder under landing/ whose name is not a batch id (engine/identifiers.py) is never registered
    names = sorted(name for entry in store.list("landing") if is_identifier(name := entry.rsplit("/", 1)[-1]))
    present = set(names)
    below = [name for name in names if name <= cursor.last]
    candidates = {name for name in names if name > cursor.last} | (set(cursor.pending) & present)
    registered: set[str] | None = None
    if _digest(below) != cursor.below:
        registered = known()
        candidates |= {name for name in below if name not in registered}
    complete, pending = [], []
    for name in sorted(candidates):
        (complete if store.exists(f"landing/{name}/_batch.json") else pending).append(name)
    if complete and registered is None:
        registered = known()
    new = [name for name in complete if name not in (registered or set())]
    last = max([cursor.last, *complete])
    next_cursor = LandingCursor(
        last=last,
        pending=pending,
        below=_digest(n for n in names if n <= last),
        review=list(cursor.review),
    )
    return LandingScan(new=new, cursor=next_cursor, checked=len(candidates))


@sensor(
    job=preprocess_job,
    minimum_interval_seconds=LANDING_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description="Registers every new complete landing batch as a partition and requests one preprocess run "
    "for it (run key landing-batch:<batch>).",
)
def landing_batch_sensor(context: SensorEvaluationContext, store: ObjectStoreResource) -> SensorResult:
    instance = context.instance
    scan = scan_landing(
        store.store(),
        LandingCursor.parse(context.cursor),
        lambda: set(instance.get_dynamic_partitions(BATCH_PARTITIONS_NAME)),
    )
    if scan.new:
        context.log.info(f"new landing batches: {scan.new}")
    split = split_by_review(store.store(), sorted(set(scan.new) | set(scan.cursor.review)))
    for batch in split.awaiting_review:
        context.log.info(f"skipping {batch}: quarantine, awaiting review (fm quarantine promote/reject)")
    for batch in split.rejected:
        context.log.info(f"skipping {batch}: rejected in quarantine review, never processed")
    cursor = scan.cursor
    cursor.review = split.awaiting_review
    return SensorResult(
        run_requests=[
            RunRequest(
                partition_key=batch,
                run_key=landing_run_key(batch),
                asset_selection=chain_asset_keys(batch_chains(store.store(), batch)),  # its own chain's steps
            )
            for batch in split.processable
        ],
        dynamic_partitions_requests=[batch_partitions.build_add_request(scan.new)] if scan.new else [],
        cursor=cursor.dump(),
    )


def materialized_assets(instance: DagsterInstance, run_id: str) -> set[str]:
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION).records
    return {record.asset_key.to_user_string() for record in records if record.asset_key is not None}


def release_already_pending(instance: DagsterInstance, run_id: str) -> str | None:
    """The id of a ``release`` run created after ``run_id`` ended that has not failed (it reads that run's
    output when it executes), if any."""
    record = instance.get_run_record_by_id(run_id)
    if record is None:
        return None
    ended = record.end_time or record.update_timestamp.timestamp()
    later = instance.get_run_records(
        RunsFilter(
            job_name=release_job.name,
            statuses=list(RELEASE_WILL_INCLUDE),
            created_after=dt.datetime.fromtimestamp(ended, tz=dt.timezone.utc),
        ),
        limit=1,
    )
    return later[0].dagster_run.run_id if later else None


@run_status_sensor(
    run_status=DagsterRunStatus.SUCCESS,
    name="release_after_preprocess",
    request_job=release_job,
    minimum_interval_seconds=RELEASE_INTERVAL_SECONDS,
    default_status=DefaultSensorStatus.RUNNING,
    description="After a successful run (sensor, UI, backfill) that materialized shard, decontaminate, "
    "tokenize or media_shard, requests one release run (run key release-after:<run id>) unless a later one is pending.",
)
def release_after_preprocess(context: RunStatusSensorContext) -> RunRequest | SkipReason:
    run = context.dagster_run
    if run.job_name == release_job.name:
        return SkipReason(f"{run.run_id} is a release run")
    touched = materialized_assets(context.instance, run.run_id) & RELEASE_INPUTS
    if not touched:
        return SkipReason(f"run {run.run_id} materialized none of {sorted(RELEASE_INPUTS)}")
    pending = release_already_pending(context.instance, run.run_id)
    if pending is not None:
        return SkipReason(
            f"release run {pending} was created after run {run.run_id} ended and will include it"
        )
    context.log.info(
        f"run {run.run_id} ({run.job_name}) materialized {sorted(touched)}: requesting a release"
    )
    return RunRequest(run_key=release_run_key(run.run_id), tags={"fm/after_run": run.run_id})
