"""Refs: the only mutable files. ``refs/<stage>/<batch>.json`` names a stage's current output folder.

Data under ``stages/`` is immutable and content-addressed; a ref is updated (atomically) each time a
stage materializes, like a git branch pointing at a commit. Downstream stages and reports follow refs.

Cross-batch state reads the refs of *earlier* batches (``earlier_outputs``). "Earlier" is defined by the
landed complete batches (those ``landing.list_complete_batches`` returns; id = landing order), not by
which batches happen to have output already: when an earlier landed batch has no output of the stage yet,
the stage must not run against a partial prior set, so ``earlier_outputs`` raises ``EarlierBatchPending``.
The Dagster layer turns that into a bounded wait (``RetryRequested``); the engine API lets it propagate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fm_assets.engine import layout
from fm_assets.engine.landing import held_for_review
from fm_assets.engine.records import PriorOutput, StageRef, StageSuccess
from fm_assets.engine.store import ObjectStore


class MissingUpstreamError(RuntimeError):
    """A stage ran before its upstream stage had output for that batch."""


NAMED_BATCHES = 8  # batch ids spelled out in an EarlierBatchPending message (a backfill may miss thousands)

# Whether batch B feeds stage S (``feeds(store, S, B)``): only those earlier batches are waited for. A batch
# runs only its own chains' stages (a media-only batch has no text dedup output, ever), so the stages layer,
# which knows the chains, plugs ``stages.batch_chains.feeds_stage`` in here; the engine alone waits for all.
BatchFeeds = Callable[[ObjectStore, str, str], bool]
_FEEDS: list[BatchFeeds] = []


def set_batch_feeds(feeds: BatchFeeds) -> None:
    _FEEDS[:] = [feeds]


class EarlierBatchPending(RuntimeError):
    """Cross-batch state needs output of ``stage`` for earlier landed batches that do not have it yet.

    ``waiter`` is what waits (``dedup[<batch>]``, ``tokenizer``); ``missing`` the earlier batches, in id
    order. Retrying later is correct (the output is deterministic once they have run); running on without
    them is not. ``waited_seconds`` is set when a caller gives up waiting, which changes the advice.
    """

    def __init__(
        self,
        stage: str,
        waiter: str,
        missing: Sequence[str],
        *,
        purpose: str = "its cross-batch state must cover every earlier landed batch",
        waited_seconds: float | None = None,
    ) -> None:
        self.stage = stage
        self.waiter = waiter
        self.missing = list(missing)
        self.purpose = purpose
        self.waited_seconds = waited_seconds
        super().__init__(self._message())

    def _message(self) -> str:
        named = " ".join(self.missing[:NAMED_BATCHES])
        more = f" (and {len(self.missing) - NAMED_BATCHES} more)" if len(self.missing) > NAMED_BATCHES else ""
        head = (
            f"{self.waiter} cannot run yet: {self.purpose}, and {len(self.missing)} landed batch(es) it depends "
            f"on have no `{self.stage}` output: {named}{more}."
        )
        command = (
            f"`fm run {named}` (or `fm run`, which runs every landed batch in id order)"
            if not more
            else "`fm run` (every landed batch, in id order)"
        )
        if self.waited_seconds is None:
            return f"{head} It can run once they have; if they are not being run, run them: {command}."
        return (
            f"{head} Gave up after waiting {self.waited_seconds:.0f}s for them; they do not seem to be running. "
            f"Run them: {command}, then run this batch again."
        )

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes despite the keyword arguments
        return (_restore_pending, (self.stage, self.waiter, self.missing, self.purpose, self.waited_seconds))

    def gave_up(self, waited_seconds: float) -> EarlierBatchPending:
        """The same condition, for a caller that stopped waiting after ``waited_seconds``."""
        return EarlierBatchPending(
            self.stage, self.waiter, self.missing, purpose=self.purpose, waited_seconds=waited_seconds
        )


def _restore_pending(
    stage: str, waiter: str, missing: list[str], purpose: str, waited_seconds: float | None
) -> EarlierBatchPending:
    return EarlierBatchPending(stage, waiter, missing, purpose=purpose, waited_seconds=waited_seconds)


def write_ref(
    store: ObjectStore, stage: str, batch: str, success: StageSuccess, *, cache_hit: bool, wall_seconds: float
) -> None:
    """Point the stage's ref at ``success``'s folder and record how the last materialization went."""
    ref = StageRef(success.prefix, success.data_version, cache_hit, round(wall_seconds, 4))
    store.write_json(layout.stage_ref(stage, batch), ref.to_json())


def record_failure(store: ObjectStore, stage: str, batch: str, error: BaseException) -> None:
    """Note that the stage's latest materialization for the batch failed (its ref still names the last good
    output, which the release must then not treat as current)."""
    message = f"{type(error).__name__}: {error}".splitlines()[0][:500]
    store.write_json(layout.stage_failure(stage, batch), {"stage": stage, "batch": batch, "error": message})


def clear_failure(store: ObjectStore, stage: str, batch: str) -> None:
    rel = layout.stage_failure(stage, batch)
    if store.exists(rel):
        store.delete(rel)


def read_failure(store: ObjectStore, stage: str, batch: str) -> str | None:
    rel = layout.stage_failure(stage, batch)
    return store.read_json(rel)["error"] if store.exists(rel) else None


def read_ref(store: ObjectStore, stage: str, batch: str) -> StageRef | None:
    rel = layout.stage_ref(stage, batch)
    return StageRef.from_json(store.read_json(rel)) if store.exists(rel) else None


def read_success_at(store: ObjectStore, prefix: str) -> StageSuccess:
    return StageSuccess.from_json(store.read_json(layout.success_marker(prefix)))


def read_success(store: ObjectStore, stage: str, batch: str) -> StageSuccess:
    ref = read_ref(store, stage, batch)
    if ref is None:
        raise MissingUpstreamError(
            f"stage '{stage}' has no output for batch {batch} yet; materialize it first (fm run {batch})"
        )
    return read_success_at(store, ref.prefix)


def batches_with_ref(store: ObjectStore, stage: str) -> list[str]:
    return sorted(
        path.rsplit("/", 1)[-1].removesuffix(".json") for path in store.list(layout.refs_dir(stage))
    )


def pending_earlier(store: ObjectStore, stage: str, batch: str) -> list[str]:
    """Landed complete batches that sort before ``batch`` and have no ``stage`` output yet, in id order.

    The same set as ``[b for b in list_complete_batches(store) if b < batch and b has no ref]``, but only
    the batches without a ref have their ``_batch.json`` looked up (two listings in the common case where
    every earlier batch has run, instead of one lookup per landed batch on S3).
    """
    have = set(batches_with_ref(store, stage))
    names = sorted(entry.rsplit("/", 1)[-1] for entry in store.list(layout.landing_dir()))
    return [
        name
        for name in names
        if name < batch
        and name not in have
        and store.exists(layout.batch_manifest(name))
        and not held_for_review(store, name)  # an unreviewed quarantine batch is not processed: never wait
        and all(feeds(store, stage, name) for feeds in _FEEDS)  # a batch of another chain: never wait
    ]


class EarlierBatchFailed(RuntimeError):
    """An earlier batch this one depends on has no ``stage`` output because its latest run of ``stage``
    failed: waiting would wait for nothing (nobody re-runs a failed batch by itself), so this fails now."""

    def __init__(self, stage: str, waiter: str, failed: dict[str, str]) -> None:
        self.stage, self.waiter, self.failed = stage, waiter, dict(failed)
        listed = "; ".join(f"{b}: {error}" for b, error in list(self.failed.items())[:NAMED_BATCHES])
        super().__init__(
            f"{waiter} cannot run: its cross-batch state must cover every earlier landed batch, and the latest "
            f"`{stage}` run of {len(self.failed)} of them failed ({listed}). Fix that and run them first: "
            f"`fm run {' '.join(list(self.failed)[:NAMED_BATCHES])}`; then this batch."
        )


def earlier_outputs(store: ObjectStore, stage: str, batch: str) -> list[PriorOutput]:
    """The committed outputs of ``stage`` for every batch that sorts before ``batch`` (cross-batch indexes).

    Batches are ordered by id (landing order). The prior set is every earlier landed complete batch (plus
    any earlier batch that has output without a landing, which serial runs would see too), so it is the
    same for serial and concurrent runs: if an earlier landed batch has no ``stage`` output yet this raises
    ``EarlierBatchPending`` instead of returning a partial set, or ``EarlierBatchFailed`` when that batch's
    latest run of ``stage`` failed (its failure record is removed by its next success).
    """
    missing = pending_earlier(store, stage, batch)
    failed = {b: error for b in missing if (error := read_failure(store, stage, b)) is not None}
    if failed:
        raise EarlierBatchFailed(stage, f"{stage}[{batch}]", failed)
    if missing:
        raise EarlierBatchPending(stage, f"{stage}[{batch}]", missing)
    found = []
    for prior in batches_with_ref(store, stage):
        if prior >= batch:
            continue
        success = read_success(store, stage, prior)
        found.append(PriorOutput(prior, success.prefix, success.data_version, success.artifacts))
    return found
