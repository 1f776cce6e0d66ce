"""Who may read what: namespace walls and revoked releases, enforced before a loader plans its stream.

A dataset release belongs to one namespace (``cloud``, ``on_device``, ...) and may later be revoked (its
manifest's ``revoked`` object). A trainer names the namespaces it may read; a source from any other
namespace, or a revoked release without an explicit override, refuses to load.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from types import SimpleNamespace
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_NAMESPACES = ("cloud",)


class NamespaceError(PermissionError):
    """A source belongs to a namespace the trainer did not allow."""


class RevokedDatasetError(PermissionError):
    """A source is a revoked release and ``allow_revoked`` was not set."""


def _revocation_text(revoked: dict[str, Any]) -> str:
    parts = []
    for key in ("reason", "revocation_id", "at"):
        if revoked.get(key):
            parts.append(f"{key}: {revoked[key]}")
    return "; ".join(parts) or "no reason recorded"


def validate_namespaces(allowed_namespaces: Collection[str]) -> None:
    """Refuse an ``allowed_namespaces`` that is a bare string or empty (ValueError with an example)."""
    if isinstance(allowed_namespaces, str) or not allowed_namespaces:
        raise ValueError(
            f"allowed_namespaces must be a non-empty collection of names such as ('cloud',), "
            f"got {allowed_namespaces!r}"
        )


def check_namespace(name: str, origin: str, namespace: str, allowed_namespaces: Collection[str]) -> None:
    """Refuse one source whose ``namespace`` is not allowed (also used before an MDS source is opened).

    Raises:
        NamespaceError: Naming the source, where it came from, its namespace, the allowed set and the fix.
    """
    if namespace in allowed_namespaces:
        return
    allowed = sorted(allowed_namespaces)
    raise NamespaceError(
        f"source {name!r} ({origin}) belongs to namespace {namespace!r}, which this trainer may not read "
        f"(allowed: {allowed}); if it really may, pass allowed_namespaces={tuple([*allowed, namespace])!r}"
    )


def check_access(sources: Sequence[Any], allowed_namespaces: Collection[str], allow_revoked: bool) -> None:
    """Refuse sources outside ``allowed_namespaces`` and revoked ones (unless ``allow_revoked``).

    Args:
        sources: Loader sources; each has ``name``, ``namespace``, ``revoked`` and ``origin`` (where it came
            from: the manifest's location, or the MDS folder).
        allowed_namespaces: Namespaces the trainer may read.
        allow_revoked: Load revoked releases anyway (a warning is logged for each).

    Raises:
        NamespaceError: A source's namespace is not allowed.
        RevokedDatasetError: A source is revoked and ``allow_revoked`` is False.
        ValueError: ``allowed_namespaces`` is a bare string or empty.
    """
    validate_namespaces(allowed_namespaces)
    for src in sources:
        check_namespace(src.name, src.origin, src.namespace, allowed_namespaces)
        if src.revoked is None:
            continue
        superseded = src.revoked.get("superseded_by")
        instead = f"; superseded by {superseded!r}: train on that release instead" if superseded else ""
        what = f"source {src.name!r} ({src.origin}) is a revoked release ({_revocation_text(src.revoked)})"
        if not allow_revoked:
            raise RevokedDatasetError(
                f"{what}{instead}; to read it anyway (e.g. to reproduce an old run) pass allow_revoked=True"
            )
        logger.warning("%s; reading it because allow_revoked=True%s", what, instead)


def check_release(
    namespace: str, revoked: dict | None, where: str, allowed_namespaces: Collection[str], allow_revoked: bool
) -> None:
    """:func:`check_access` for one release known by its manifest fields (``where`` names it in the message)."""
    release = SimpleNamespace(name=where, origin="media manifest", namespace=namespace, revoked=revoked)
    check_access([release], allowed_namespaces, allow_revoked)
