"""Revocations: a recorded request to remove documents from every future release, with its reason.

A revocation names a (source, licence) pair (``*`` for any) or document hashes (sha256 of the UTF-8 text, as
the blocklist stage computes them; for a media sample, of its raw media bytes, as ``media_filter`` compares
them). It is written once to ``compliance/revocations/<id>.json`` and every
recorded revocation feeds the blocklist stage's lists (``side_inputs.blocklists.with_revocations``) and
``media_filter``'s side input, so the list fingerprint, and with it the stage key of blocklist (media_filter)
and everything after it, changes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from dataclasses import asdict, dataclass
from typing import Any

from fm_assets.compliance import paths
from fm_assets.engine import markdown, spdx
from fm_assets.engine.landing import read_batch_manifest
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.blocklist.lists import WILDCARD, Blocklists

REVOKED_NOTICE_MARK = "**REVOKED**"  # how card.md says its version is revoked
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class RevocationError(ValueError):
    """A revocation request that cannot be recorded; the message says what is missing."""


@dataclass(frozen=True)
class Revocation:
    id: str
    at: str
    reason: str
    requested_by: str
    source: str | None = None  # with license: a (source, licence) pair; "*" matches any
    license: str | None = None
    doc_hashes: tuple[str, ...] = ()

    @property
    def by_pair(self) -> bool:
        return self.source is not None or self.license is not None

    def describe(self) -> str:
        if self.by_pair:
            return f"source {self.source or WILDCARD}, licence {self.license or WILDCARD}"
        return f"{len(self.doc_hashes)} document hash(es)"

    def to_json(self) -> dict[str, Any]:
        obj = asdict(self)
        obj["doc_hashes"] = list(self.doc_hashes)
        return obj

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Revocation:
        return cls(
            id=obj["id"],
            at=obj["at"],
            reason=obj["reason"],
            requested_by=obj.get("requested_by") or "",
            source=obj.get("source"),
            license=obj.get("license"),
            doc_hashes=tuple(obj.get("doc_hashes") or ()),
        )


def prepare_revocation(
    store: ObjectStore,
    *,
    reason: str | None = None,
    requested_by: str | None = None,
    source: str | None = None,
    license_id: str | None = None,
    doc_hashes: list[str] | None = None,
    now: dt.datetime | None = None,
) -> Revocation:
    """Validate one revocation request without writing anything. Its id ends with a key derived from what it
    revokes, why and for whom (never the time): when that request is already recorded, the recorded revocation
    is returned, so re-running an interrupted ``fm revoke`` resumes it instead of starting another."""
    if not reason or not reason.strip():
        raise RevocationError("a revocation needs --reason: legal must be able to say why data was removed")
    hashes = tuple(sorted({h.strip().lower() for h in doc_hashes or () if h.strip()}))
    bad = [h for h in hashes if not SHA256.match(h)]
    if bad:
        raise RevocationError(f"--doc-hash {bad[0]!r} is not a sha256 hex digest (64 hex characters)")
    by_pair = source is not None or license_id is not None
    if by_pair == bool(hashes):
        raise RevocationError("name what to revoke: --source and/or --license, or --doc-hash (not both)")
    if by_pair and (source or WILDCARD) == WILDCARD and (license_id or WILDCARD) == WILDCARD:
        raise RevocationError("--source * --license * would revoke everything; name a source or a licence")
    if license_id and license_id != WILDCARD:
        try:
            license_id = spdx.normalize(license_id)  # the spelling landing recorded
        except spdx.LicenceError as exc:
            raise RevocationError(f"--license: {exc}") from None
    pair = ((source or WILDCARD), (license_id or WILDCARD)) if by_pair else (None, None)
    key = request_key(pair[0], pair[1], hashes, reason.strip(), (requested_by or "").strip())
    for recorded in list_revocations(store):
        if recorded.id.endswith(f"-{key}"):
            return recorded
    when = now or dt.datetime.now(dt.timezone.utc)
    return Revocation(
        id=f"{when.strftime('%Y%m%dT%H%M%S%fZ')}-{key}",
        at=when.isoformat(timespec="seconds"),
        reason=reason.strip(),
        requested_by=(requested_by or "").strip(),
        source=pair[0],
        license=pair[1],
        doc_hashes=hashes,
    )


def request_key(
    source: str | None, license_id: str | None, hashes: tuple[str, ...], reason: str, requested_by: str
) -> str:
    """The deterministic part of a revocation id: the same request always gets the same key."""
    return hashlib.sha256(repr((source, license_id, hashes, reason, requested_by)).encode()).hexdigest()[:12]


def is_recorded(store: ObjectStore, revocation: Revocation) -> bool:
    return store.exists(paths.revocation(revocation.id))


def write_revocation(store: ObjectStore, revocation: Revocation) -> None:
    """Record ``revocation`` (once: a recorded one is left as it is)."""
    if not is_recorded(store, revocation):
        store.write_json(paths.revocation(revocation.id), revocation.to_json())


def record_revocation(store: ObjectStore, **request: Any) -> Revocation:
    """Validate and record one revocation (``prepare_revocation``'s arguments); returns it."""
    revocation = prepare_revocation(store, **request)
    write_revocation(store, revocation)
    return revocation


def list_revocations(store: ObjectStore) -> list[Revocation]:
    """Every recorded revocation, oldest first."""
    found = [
        Revocation.from_json(store.read_json(rel))
        for rel in store.list(paths.revocations_dir())
        if rel.endswith(".json")
    ]
    return sorted(found, key=lambda r: r.id)


def read_revocation(store: ObjectStore, revocation_id: str) -> Revocation:
    rel = paths.revocation(revocation_id)
    if not store.exists(rel):
        raise RevocationError(f"no revocation {revocation_id} (see `fm audit`)")
    return Revocation.from_json(store.read_json(rel))


def revocation_blocklists(store: ObjectStore, batch: str | None = None) -> Blocklists:
    """The blocklist entries the recorded revocations add (revoked pairs and document hashes). For ``batch``:
    only the pairs that match its landed (source, licence), which every one of its records carries, so a
    revocation of another source leaves this batch's lists (and its blocklist key) unchanged."""
    revocations = list_revocations(store)
    if batch is not None and any(r.by_pair for r in revocations):
        manifest = read_batch_manifest(store, batch)
        revocations = [
            r for r in revocations if not r.by_pair or matches_batch(r, manifest.source, manifest.license)
        ]
    return Blocklists(
        doc_hashes=tuple(h for r in revocations for h in r.doc_hashes),
        revoked=tuple((r.source or WILDCARD, r.license or WILDCARD) for r in revocations if r.by_pair),
    ).normalised()


def revoked_by(
    lists: Blocklists, source: str, licence: str, content_sha256: str
) -> tuple[str, dict[str, Any]] | None:
    """Why one sample is revoked by ``lists`` (reason and details, the blocklist stage's reasons), or None:
    its (source, licence) matches a revoked pair (``*`` matches any), or its content hash is a revoked hash."""
    for pair in lists.revoked:
        if pair[0] in (WILDCARD, source) and pair[1] in (WILDCARD, licence):
            return "revoked_license", {"source": pair[0], "license": pair[1]}
    if content_sha256 in lists.doc_hashes:
        return "blocked_doc_hash", {"sha256": content_sha256}
    return None


def matches_batch(revocation: Revocation, source: str, licence: str) -> bool:
    """Whether a (source, licence) revocation covers a batch of ``source`` under ``licence``."""
    return (
        revocation.by_pair
        and revocation.source in (WILDCARD, source)
        and revocation.license in (WILDCARD, licence)
    )


def revoked_notice(mark: dict[str, Any] | None) -> list[str]:
    """The Markdown lines a revoked version's card.md opens with (none when it is not revoked)."""
    if not mark:
        return []
    superseded = mark.get("superseded_by")
    return [
        f"> {REVOKED_NOTICE_MARK} by revocation {markdown.escape(mark.get('revocation_id'))} at "
        f"{markdown.escape(mark.get('at'))}: {markdown.escape(mark.get('reason'))}. "
        + (f"Superseded by version {markdown.escape(superseded)}. " if superseded else "")
        + "fm_loader refuses to load this version unless told otherwise.",
        "",
    ]
