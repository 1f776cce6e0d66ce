"""The one answer every filter-like transform gives: keep the record (maybe changed) or drop it with a reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    keep: bool
    reason: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    record: dict[str, Any] | None = None  # the kept record when the transform changed it

    @classmethod
    def kept(cls, record: dict[str, Any] | None = None) -> Verdict:
        return cls(True, record=record)

    @classmethod
    def drop(cls, reason: str, details: Mapping[str, Any] | None = None) -> Verdict:
        return cls(False, reason, dict(details or {}))


KEEP = Verdict(True)
