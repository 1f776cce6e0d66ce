"""Quarantine is a holding area: a batch is processed only after a recorded promotion, never after a
rejection, and every way around the review is refused with a clear error."""

from __future__ import annotations

import json

import pytest

from fm_assets.compliance import paths
from fm_assets.compliance.namespaces import (
    QuarantinedBatchError,
    effective_namespace,
    require_processable,
    split_by_review,
)
from fm_assets.compliance.promotions import ReviewError, promote, read_decision, reject
from fm_assets.engine.landing import held_for_review
from fm_assets.engine.refs import pending_earlier


def test_a_quarantine_batch_is_not_processable_until_promoted(store, land):
    batch = land("forum", namespace="quarantine")
    assert effective_namespace(store, batch).status == "awaiting_review"
    with pytest.raises(QuarantinedBatchError, match="fm quarantine promote"):
        require_processable(store, batch)
    decision = promote(store, batch, to="cloud", reviewer="jane", reason="LEGAL-7 cleared")
    assert (decision.reviewer, decision.to, decision.from_namespace) == ("jane", "cloud", "quarantine")
    effective = require_processable(store, batch)
    assert (effective.name, effective.status, effective.landed) == ("cloud", "promoted", "quarantine")
    assert effective.decision_sha256 == read_decision(store, batch).sha256()  # type: ignore[union-attr]


def test_a_rejected_batch_is_never_processable(store, land):
    batch = land("forum", namespace="quarantine")
    reject(store, batch, reviewer="jane", reason="scraped without consent")
    with pytest.raises(QuarantinedBatchError, match="rejected"):
        require_processable(store, batch)
    with pytest.raises(ReviewError, match="already rejected"):
        promote(store, batch, to="cloud", reviewer="joe", reason="changed my mind")


@pytest.mark.parametrize(
    ("reviewer", "reason", "match"),
    [
        (None, "ok", "--reviewer"),
        ("  ", "ok", "--reviewer"),
        ("jane", None, "--reason"),
        ("jane", "", "--reason"),
    ],
)
def test_promoting_without_reviewer_or_reason_is_refused(store, land, reviewer, reason, match):
    batch = land("forum", namespace="quarantine")
    with pytest.raises(ReviewError, match=match):
        promote(store, batch, to="cloud", reviewer=reviewer, reason=reason)
    assert read_decision(store, batch) is None


@pytest.mark.parametrize("target", ["quarantine", "public", ""])
def test_promoting_to_a_namespace_that_is_not_released_is_refused(store, land, target):
    batch = land("forum", namespace="quarantine")
    with pytest.raises(ReviewError, match="not a release namespace"):
        promote(store, batch, to=target, reviewer="jane", reason="ok")


def test_only_quarantine_batches_are_reviewed(store, land):
    batch = land("phone-logs", namespace="on_device")
    with pytest.raises(ReviewError, match="namespace 'on_device', not 'quarantine'"):
        promote(store, batch, to="cloud", reviewer="jane", reason="ok")
    with pytest.raises(ReviewError, match="not complete"):
        promote(store, "no-such-batch", to="cloud", reviewer="jane", reason="ok")


def test_a_hand_written_promotion_of_on_device_data_is_refused(store, land):
    batch = land("phone-logs", namespace="on_device")
    forged = {"batch": batch, "action": "promote", "reviewer": "x", "reason": "x", "at": "now",
              "from_namespace": "quarantine", "to": "cloud"}  # fmt: skip
    store.write_json(paths.promotion(batch), forged)
    # the landed namespace is what counts: on_device stays on_device
    assert effective_namespace(store, batch).name == "on_device"
    quarantined = land("forum", namespace="quarantine")
    store.write_json(paths.promotion(quarantined), {**forged, "batch": quarantined, "reviewer": ""})
    with pytest.raises(ReviewError, match="not valid"):
        effective_namespace(store, quarantined)
    store.write_json(paths.promotion(quarantined), {**forged, "batch": quarantined, "to": "quarantine"})
    with pytest.raises(ReviewError, match="not released"):
        effective_namespace(store, quarantined)


def test_editing_the_landed_namespace_is_refused(store, land):
    batch = land("phone-logs", namespace="on_device")
    rel = f"landing/{batch}/_batch.json"
    manifest = json.loads(store.read_bytes(rel))
    store.write_bytes(rel, json.dumps({**manifest, "namespace": "cloud"}).encode())
    with pytest.raises(Exception, match="changed after landing"):
        effective_namespace(store, batch)


def test_unreviewed_batches_do_not_block_later_batches_and_the_sensor_split(store, land):
    waiting = land("forum", namespace="quarantine")
    rejected = land("spam", namespace="quarantine")
    reject(store, rejected, reviewer="jane", reason="spam")
    later = land("docs")
    assert held_for_review(store, waiting) and held_for_review(store, rejected)
    assert pending_earlier(store, "dedup", later) == []  # an unreviewed batch is never waited for
    split = split_by_review(store, [waiting, rejected, later])
    assert (split.processable, split.awaiting_review, split.rejected) == ([later], [waiting], [rejected])
    promote(store, waiting, to="on_device", reviewer="jane", reason="ok")
    assert not held_for_review(store, waiting)
    assert pending_earlier(store, "dedup", later) == [waiting]  # promoted: now an earlier batch to wait for
