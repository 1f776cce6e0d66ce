"""SPDX licence expressions: validated against the SPDX list shipped by ``license-expression``.

An expression is accepted when it parses and every licence and exception in it is an SPDX identifier, or a
custom ``LicenseRef-<name>`` (the SPDX way to name a licence that is not on the list). ``NOASSERTION``
(SPDX's "nobody said") is accepted alone: it lands, but no release admits it without an approved exception.
Common non-SPDX words (``Proprietary``, ``All-Rights-Reserved``, ...) are refused with the ``LicenseRef-``
spelling to use instead. The family of a licence (Permissive, Copyleft, ...) is ScanCode's category, from
the same package's licence index.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from license_expression import (
    ExpressionError,
    Licensing,
    get_license_index,
    get_spdx_licensing,
)

NOASSERTION = "NOASSERTION"
LICENSE_REF = re.compile(r"^LicenseRef-[A-Za-z0-9.\-]+$")


class LicenceError(ValueError):
    """A licence string that is not an SPDX expression; the message says what to write instead."""


@lru_cache(maxsize=1)
def licensing() -> Licensing:
    return get_spdx_licensing()


@lru_cache(maxsize=1)
def categories() -> dict[str, str]:
    """SPDX identifier -> ScanCode category (Permissive, Copyleft, Copyleft Limited, Public Domain, ...)."""
    found: dict[str, str] = {}
    for entry in get_license_index():
        for key in [
            entry.get("spdx_license_key"),
            *(entry.get("other_spdx_license_keys") or []),
        ]:
            if key and entry.get("category") and not key.startswith("LicenseRef-scancode"):
                found.setdefault(key, entry["category"])
    return found


def _hint(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9.\-]+", "-", text.strip()).strip("-") or "Custom"
    return f"LicenseRef-{slug}"


def parse(expression: str) -> Any:
    """The parsed expression (license-expression's tree); ``LicenceError`` if it is not valid SPDX."""
    text = (expression or "").strip()
    if not text:
        raise LicenceError("a licence is required: an SPDX identifier or expression (e.g. MIT, CC-BY-SA-4.0)")
    try:
        parsed = licensing().parse(text, validate=False, strict=True)
    except ExpressionError as exc:
        raise LicenceError(f"licence {text!r} is not a valid SPDX expression ({exc})") from None
    if parsed is None:
        raise LicenceError(f"licence {text!r} is empty")
    known = licensing().known_symbols
    keys = [
        str(getattr(symbol, "key", symbol)) for symbol in licensing().license_symbols(parsed, decompose=True)
    ]
    unknown = [key for key in keys if key not in known and not LICENSE_REF.match(key)]
    if unknown:
        raise LicenceError(
            f"licence {text!r}: {', '.join(repr(u) for u in unknown)} is not an SPDX identifier. Use the SPDX id "
            f"(https://spdx.org/licenses/), or name a custom licence as {_hint(unknown[0])!r} (LicenseRef-...)"
        )
    return parsed


def normalize(expression: str) -> str:
    """The expression in canonical SPDX spelling (``mit or apache-2.0`` -> ``MIT OR Apache-2.0``)."""
    if (expression or "").strip() == NOASSERTION:
        return NOASSERTION
    return str(parse(expression))


def category(identifier: str) -> str | None:
    """ScanCode's category of an SPDX identifier (None for ``LicenseRef-`` and unknown ids)."""
    return categories().get(identifier)
