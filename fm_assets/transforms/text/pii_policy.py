"""The per-namespace PII policy: what pii_preflag does with a document the detectors flag.

A policy maps each namespace (and a default) to an ``action`` (``redact``: every span is replaced by a
typed placeholder such as ``<EMAIL>``; ``drop``: the document is rejected; ``keep``: kept unchanged, flagged)
and an ``ner`` mode (``off``; ``flagged``: the NER pass runs on documents the regex pass flagged;
``always``). Its version is the hash of its content, so editing the policy changes the stage key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

Action = Literal["redact", "drop", "keep"]
NerMode = Literal["off", "flagged", "always"]
ACTIONS: tuple[str, ...] = ("redact", "drop", "keep")
NER_MODES: tuple[str, ...] = ("off", "flagged", "always")
DEFAULT_POLICY_FILE = "pii_policy.yaml"

Span = tuple[int, int]


class PiiPolicyError(ValueError):
    """The policy file cannot be used; the message names the namespace and field."""


@dataclass(frozen=True)
class NamespaceRule:
    action: Action = "redact"
    ner: NerMode = "off"

    @classmethod
    def parse(cls, where: str, raw: Any) -> NamespaceRule:
        if not isinstance(raw, dict):
            raise PiiPolicyError(f"{where}: expected a mapping with 'action' and 'ner'")
        action = str(raw.get("action", "redact"))
        ner = str(raw.get("ner", "off")).lower() if raw.get("ner") is not False else "off"
        if action not in ACTIONS:
            raise PiiPolicyError(f"{where}: action {action!r} is not one of {', '.join(ACTIONS)}")
        if ner not in NER_MODES:
            raise PiiPolicyError(f"{where}: ner {ner!r} is not one of {', '.join(NER_MODES)}")
        return cls(action, ner)  # type: ignore[arg-type]


@dataclass(frozen=True)
class PiiPolicy:
    default: NamespaceRule = NamespaceRule()
    namespaces: dict[str, NamespaceRule] = field(default_factory=dict)

    def rule(self, namespace: str) -> NamespaceRule:
        return self.namespaces.get(namespace, self.default)

    @property
    def uses_ner(self) -> bool:
        return any(rule.ner != "off" for rule in (self.default, *self.namespaces.values()))

    def to_json(self) -> dict[str, Any]:
        return {
            "default": vars(self.default),
            "namespaces": {name: vars(rule) for name, rule in sorted(self.namespaces.items())},
        }

    @property
    def version(self) -> str:
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @classmethod
    def parse(cls, raw: Any, where: str = "policy") -> PiiPolicy:
        if not isinstance(raw, dict):
            raise PiiPolicyError(f"{where}: expected a mapping with 'default' and 'namespaces'")
        namespaces = raw.get("namespaces") or {}
        if not isinstance(namespaces, dict):
            raise PiiPolicyError(f"{where}: 'namespaces' must map namespace names to rules")
        return cls(
            NamespaceRule.parse(f"{where}: default", raw.get("default", {})),
            {
                str(name): NamespaceRule.parse(f"{where}: namespace {name}", rule)
                for name, rule in namespaces.items()
            },
        )


def load_policy(path: str | None = None) -> PiiPolicy:
    """The policy in ``path`` (YAML/JSON), else the bundled ``fm_assets/data/pii_policy.yaml``."""
    if path:
        file = Path(path)
        if not file.is_file():
            raise PiiPolicyError(f"PII policy file {path} does not exist (FM_PII_POLICY_FILE)")
        return PiiPolicy.parse(yaml.safe_load(file.read_text(encoding="utf-8")), str(file))
    text = resources.files("fm_assets").joinpath("data", DEFAULT_POLICY_FILE).read_text(encoding="utf-8")
    return PiiPolicy.parse(yaml.safe_load(text), f"fm_assets/data/{DEFAULT_POLICY_FILE}")


def merge_spans(spans_by_kind: dict[str, list[Span]]) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, kind) in text order; of overlapping spans the longer (then earlier) wins."""
    flat = sorted(
        ((start, end, kind) for kind, spans in spans_by_kind.items() for start, end in spans),
        key=lambda s: (s[0], -(s[1] - s[0]), s[2]),
    )
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in flat:
        if merged and start < merged[-1][1]:
            if end - start > merged[-1][1] - merged[-1][0] and start == merged[-1][0]:
                merged[-1] = (start, end, kind)
            continue
        merged.append((start, end, kind))
    return merged


def redact(text: str, spans_by_kind: dict[str, list[Span]]) -> str:
    """``text`` with every PII span replaced by ``<KIND>`` (``<EMAIL>``, ``<PERSON>``, ...)."""
    pieces = []
    position = 0
    for start, end, kind in merge_spans(spans_by_kind):
        pieces.append(text[position:start])
        pieces.append(f"<{kind.upper()}>")
        position = end
    pieces.append(text[position:])
    return "".join(pieces)
