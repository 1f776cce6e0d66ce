"""The release licence policy: which licences each namespace's release admits, and the audited exceptions.

The policy is YAML (``licence_policy.yaml`` beside this module; a root overrides it with
``compliance/licence_policy.yaml``). A batch whose licence the policy of its namespace does not admit is held
back from the release, with the reason; an exception (licence, source, namespace, approver, reason, optional
expiry) admits it and is named in the release card and ``fm audit``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from license_expression import AND, OR, LicenseSymbol, LicenseWithExceptionSymbol

from fm_assets.compliance import paths
from fm_assets.engine import spdx
from fm_assets.engine.store import ObjectStore

DEFAULT_POLICY = Path(__file__).with_name("licence_policy.yaml")
WILDCARD = "*"


class PolicyError(ValueError):
    """The licence policy file is not valid."""


@dataclass(frozen=True)
class LicenceException:
    license: str
    source: str
    namespace: str
    approver: str
    reason: str
    expires: str | None = None  # YYYY-MM-DD, inclusive

    def applies(self, licence: str, source: str, namespace: str, today: dt.date) -> bool:
        return (
            self.license == licence
            and self.source in (WILDCARD, source)
            and self.namespace == namespace
            and not self.expired(today)
        )

    def expired(self, today: dt.date) -> bool:
        return self.expires is not None and dt.date.fromisoformat(self.expires) < today

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


@dataclass(frozen=True)
class NamespaceRule:
    categories: frozenset[str]
    licenses: frozenset[str]
    deny: frozenset[str]

    def admits_symbol(self, key: str) -> bool:
        if key in self.deny:
            return False
        return key in self.licenses or spdx.category(key) in self.categories


@dataclass(frozen=True)
class Decision:
    admitted: bool
    reason: str
    exception: LicenceException | None = None


@dataclass(frozen=True)
class LicencePolicy:
    namespaces: dict[str, NamespaceRule]
    exceptions: tuple[LicenceException, ...] = ()
    origin: str = str(DEFAULT_POLICY)
    sha256: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    def decide(self, licence: str, source: str, namespace: str, today: dt.date | None = None) -> Decision:
        """Whether ``namespace``'s release admits a batch of ``source`` under ``licence``, and why."""
        today = today or dt.datetime.now(dt.timezone.utc).date()
        rule = self.namespaces.get(namespace)
        if rule is None:
            return Decision(False, f"the licence policy has no rule for namespace {namespace!r}")
        for exception in self.exceptions:
            if exception.applies(licence, source, namespace, today):
                return Decision(
                    True,
                    f"admitted by exception (approver {exception.approver}: {exception.reason})",
                    exception,
                )
        expired = [e for e in self.exceptions if e.license == licence and e.expired(today)]
        suffix = f"; its exception expired on {expired[0].expires}" if expired else ""
        if licence == spdx.NOASSERTION:
            return Decision(
                False,
                f"licence NOASSERTION (unknown) needs an approved exception{suffix}",
            )
        try:
            parsed = spdx.parse(licence)
        except spdx.LicenceError as exc:
            return Decision(False, f"{exc}{suffix}")
        refused = _refused(parsed, rule)
        if not refused:
            return Decision(True, f"admitted by the {namespace} policy")
        listed = ", ".join(f"{key} ({spdx.category(key) or 'custom/unknown family'})" for key in refused)
        return Decision(
            False,
            f"licence {licence!r} is outside the {namespace} release policy (not admitted: {listed}; admitted "
            f"families: {', '.join(sorted(rule.categories))}){suffix}",
        )


def _refused(node: Any, rule: NamespaceRule) -> list[str]:
    """The licence ids that keep ``node`` from being admitted ([] = admitted)."""
    if isinstance(node, LicenseWithExceptionSymbol):
        return _refused(node.license_symbol, rule)
    if isinstance(node, LicenseSymbol):
        return [] if rule.admits_symbol(node.key) else [node.key]
    if isinstance(node, OR):
        options = [_refused(arg, rule) for arg in node.args]
        return [] if any(not o for o in options) else sorted({k for o in options for k in o})
    if isinstance(node, AND):
        return sorted({k for arg in node.args for k in _refused(arg, rule)})
    return [str(node)]


def parse_policy(text: str, origin: str) -> LicencePolicy:
    try:
        data = yaml.safe_load(text) or {}
        namespaces = {
            name: NamespaceRule(
                frozenset(rule.get("categories") or ()),
                frozenset(spdx.normalize(x) for x in rule.get("licenses") or ()),
                frozenset(spdx.normalize(x) for x in rule.get("deny") or ()),
            )
            for name, rule in (data.get("namespaces") or {}).items()
        }
        exceptions = tuple(_exception(entry) for entry in data.get("exceptions") or ())
    except (yaml.YAMLError, AttributeError, TypeError, ValueError) as exc:
        raise PolicyError(f"licence policy {origin} is not valid: {exc}") from exc
    digest = hashlib.sha256(text.encode()).hexdigest()
    return LicencePolicy(namespaces, exceptions, origin, digest, data)


def _exception(entry: dict[str, Any]) -> LicenceException:
    missing = [
        key for key in ("license", "namespace", "approver", "reason") if not str(entry.get(key) or "").strip()
    ]
    if missing:
        raise ValueError(
            f"exception {entry} lacks {', '.join(missing)} (an exception is approved by someone, for a reason)"
        )
    expires = entry.get("expires")
    if expires is not None:
        expires = str(expires)
        dt.date.fromisoformat(expires)
    return LicenceException(
        license=spdx.normalize(str(entry["license"])),
        source=str(entry.get("source") or WILDCARD),
        namespace=str(entry["namespace"]),
        approver=str(entry["approver"]),
        reason=str(entry["reason"]),
        expires=expires,
    )


def load_policy(store: ObjectStore) -> LicencePolicy:
    """The root's policy (``compliance/licence_policy.yaml``) if it has one, else the package default."""
    rel = paths.licence_policy()
    if store.exists(rel):
        return parse_policy(store.read_bytes(rel).decode(), store.uri(rel))
    return parse_policy(DEFAULT_POLICY.read_text(), str(DEFAULT_POLICY))
