"""The one answer every filter-like transform gives about a record: keep it (maybe changed) or drop it with a
reason. Text filters and the image and audio rule sets all answer with a ``Verdict``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """``keep``; else ``reason`` (snake_case) and ``details``.

    A kept verdict may carry the changed ``record`` and, in ``details``, what was measured on the way
    (rule sets report these as metrics); a dropped one carries what made it fail.
    """

    keep: bool
    reason: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    record: dict[str, Any] | None = None  # the kept record when the transform changed it

    @classmethod
    def kept(
        cls, record: dict[str, Any] | None = None, measurements: Mapping[str, Any] | None = None
    ) -> Verdict:
        return cls(True, details=dict(measurements or {}), record=record)

    @classmethod
    def drop(cls, reason: str, details: Mapping[str, Any] | None = None) -> Verdict:
        return cls(False, reason, dict(details or {}))

    @classmethod
    def over_limit(cls, reason: str, value: Any, threshold: Any, **extra: Any) -> Verdict:
        """Dropped by a rule: the measured ``value`` and the ``threshold`` it failed (plus ``extra``)."""
        return cls.drop(reason, {"value": value, "threshold": threshold, **extra})


KEEP = Verdict(True)
