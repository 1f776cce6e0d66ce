"""The one rule for identifiers that become path components under the root: batch ids and source names.

An identifier is 1-128 characters of letters, digits, ``_``, ``.`` and ``-``, starting with a letter or digit:
no ``/``, no ``..`` component, nothing absolute, nothing a shell, a URI or a terminal reads specially. Every
place an identifier enters (the CLI, the landing sensor, a Dagster partition key, the landing listing) checks
it with ``check_batch_id`` / ``check_source_name`` before any lock or file is touched, and
``ObjectStore.uri`` refuses a relative path that leaves the root whatever built it (``check_relative``).
"""

from __future__ import annotations

import posixpath
import re

IDENTIFIER_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class InvalidIdentifierError(ValueError):
    """A batch id, source name or path that would not stay a plain name under the root."""


def is_identifier(value: object) -> bool:
    return isinstance(value, str) and IDENTIFIER_PATTERN.fullmatch(value) is not None


def _check(value: object, what: str) -> str:
    if not is_identifier(value):
        shown = repr(value)[:80]
        raise InvalidIdentifierError(
            f"{what} {shown} is not valid: use 1-128 letters, digits, '_', '.' or '-', starting with a letter or "
            "digit"
        )
    return str(value)


def check_batch_id(batch: object) -> str:
    """``batch`` if it is a well-formed batch id, else ``InvalidIdentifierError`` (nothing touched yet)."""
    return _check(batch, "batch id")


def check_source_name(source: object) -> str:
    return _check(source, "source name")


def check_relative(rel: str) -> str:
    """``rel`` (a store-relative path) if it stays under the root once ``.`` and ``..`` are resolved."""
    stripped = rel.lstrip("/")
    if stripped and posixpath.normpath(stripped).split("/", 1)[0] == "..":
        raise InvalidIdentifierError(f"path {rel[:120]!r} leaves the storage root")
    return rel
