"""``RuleVerdict``: what an image or audio rule set says about one sample (keep, or drop with reason and value)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fm_assets.engine.verdict import Verdict


@dataclass(frozen=True)
class RuleVerdict:
    """``keep``; else ``reason`` (snake_case) and ``details`` with the measured ``value`` and the ``threshold``.

    A kept verdict's details hold the measurements (useful as metrics); a dropped one's hold at least
    ``value`` and ``threshold`` for the rule that failed.
    """

    keep: bool
    reason: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def kept(cls, measurements: Mapping[str, Any] | None = None) -> RuleVerdict:
        return cls(True, None, dict(measurements or {}))

    @classmethod
    def drop(cls, reason: str, value: Any, threshold: Any, **extra: Any) -> RuleVerdict:
        return cls(False, reason, {"value": value, "threshold": threshold, **extra})

    def to_verdict(self, record: dict[str, Any] | None = None) -> Verdict:
        """The engine's record-stage ``Verdict`` for this answer."""
        if self.keep:
            return Verdict.kept(record)
        return Verdict.drop(self.reason or "rejected", self.details)
