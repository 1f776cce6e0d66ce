"""Quarantine review decisions: a promotion (to a release namespace) or a rejection, one record per batch.

Landing is immutable, so a decision never edits ``_batch.json``: it is a separate record naming the reviewer,
the reason and the time (``compliance/promotions/<batch>.json`` or ``compliance/rejections/<batch>.json``).
A batch gets at most one decision. Records are checked when read: a promotion of a batch that was not landed
in ``quarantine``, to a namespace that is not released, or without a reviewer is refused, so a hand-written
record cannot move ``on_device`` data into ``cloud``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from fm_assets.compliance import paths
from fm_assets.engine.landing import LandingError, read_batch_manifest
from fm_assets.engine.store import ObjectStore

QUARANTINE = "quarantine"
RELEASE_NAMESPACES = ("cloud", "on_device")
PAST = {"promote": "promoted", "reject": "rejected"}


class ReviewError(ValueError):
    """A quarantine decision that cannot be recorded (or a stored one that is not valid)."""


@dataclass(frozen=True)
class Decision:
    """One reviewer's decision on a quarantine batch (``to`` is None for a rejection)."""

    batch: str
    action: str  # "promote" | "reject"
    reviewer: str
    reason: str
    at: str
    from_namespace: str = QUARANTINE
    to: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Decision:
        return cls(
            batch=str(obj.get("batch") or ""),
            action=str(obj.get("action") or ""),
            reviewer=str(obj.get("reviewer") or ""),
            reason=str(obj.get("reason") or ""),
            at=str(obj.get("at") or ""),
            from_namespace=str(obj.get("from_namespace") or ""),
            to=obj.get("to"),
        )

    def sha256(self) -> str:
        return hashlib.sha256(repr(sorted(self.to_json().items())).encode()).hexdigest()


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _require_text(value: str | None, flag: str, action: str) -> str:
    if not value or not value.strip():
        raise ReviewError(
            f"{action} needs {flag}: a quarantine decision is recorded with who made it and why"
        )
    return value.strip()


def _require_quarantined(store: ObjectStore, batch: str) -> None:
    try:
        manifest = read_batch_manifest(store, batch)
    except LandingError as exc:
        raise ReviewError(str(exc)) from exc
    if manifest.namespace != QUARANTINE:
        raise ReviewError(
            f"batch {batch} was landed in namespace {manifest.namespace!r}, not {QUARANTINE!r}: only quarantine "
            "batches are reviewed (land the data again to change its namespace)"
        )
    existing = read_decision(store, batch)
    if existing is not None:
        raise ReviewError(
            f"batch {batch} was already {PAST[existing.action]} by {existing.reviewer} at {existing.at}; "
            "a decision is final (land the data again for a new review)"
        )


def promote(store: ObjectStore, batch: str, *, to: str, reviewer: str | None, reason: str | None) -> Decision:
    """Record that ``reviewer`` promoted quarantine batch ``batch`` to namespace ``to``."""
    reviewer = _require_text(reviewer, "--reviewer", "promote")
    reason = _require_text(reason, "--reason", "promote")
    if to not in RELEASE_NAMESPACES:
        raise ReviewError(
            f"--to {to!r} is not a release namespace; choose one of {', '.join(RELEASE_NAMESPACES)}"
        )
    _require_quarantined(store, batch)
    decision = Decision(batch, "promote", reviewer, reason, _now(), QUARANTINE, to)
    store.write_json(paths.promotion(batch), decision.to_json())
    return decision


def reject(store: ObjectStore, batch: str, *, reviewer: str | None, reason: str | None) -> Decision:
    """Record that ``reviewer`` rejected quarantine batch ``batch``: it is never processed or released."""
    reviewer = _require_text(reviewer, "--reviewer", "reject")
    reason = _require_text(reason, "--reason", "reject")
    _require_quarantined(store, batch)
    decision = Decision(batch, "reject", reviewer, reason, _now(), QUARANTINE, None)
    store.write_json(paths.rejection(batch), decision.to_json())
    return decision


def read_decision(store: ObjectStore, batch: str) -> Decision | None:
    """The batch's review decision, checked (``ReviewError`` if a stored record is not a valid one)."""
    found = [
        Decision.from_json(store.read_json(rel))
        for rel in (paths.promotion(batch), paths.rejection(batch))
        if store.exists(rel)
    ]
    if not found:
        return None
    if len(found) > 1:
        raise ReviewError(f"batch {batch} has both a promotion and a rejection record; remove the wrong one")
    decision = found[0]
    if decision.batch != batch or not decision.reviewer or decision.from_namespace != QUARANTINE:
        raise ReviewError(
            f"the review record of batch {batch} is not valid (batch, reviewer or 'from' field)"
        )
    if decision.action == "promote" and decision.to not in RELEASE_NAMESPACES:
        raise ReviewError(
            f"the promotion of batch {batch} names namespace {decision.to!r}, which is not released"
        )
    return decision
