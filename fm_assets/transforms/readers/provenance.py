"""A record's own provenance: the id and licence its source gave it, kept beside the batch's.

``land`` stamps every document with the batch's licence and an id of its own (the CAS hash and record
index); a record that brings an ``id`` keeps it as ``source_id``, and one that brings a ``license`` (or
``licence``) keeps it as ``record_license``. The batch's licence must be the record's (in canonical SPDX
spelling) or one alternative of the record's ``OR`` (electing one licence of a dual-licensed document, as
``--license CC-BY-SA-3.0`` for ``GPL-2.0-or-later OR CC-BY-SA-3.0``). Anything else, including a record licence
that is not SPDX at all, is a conflict: the batch's declaration must not silently relabel the record, so
``land`` quarantines it (reject ``license_conflict`` with both licences) for a reviewer to re-land it under
the right licence. An absent, null or blank record licence is no statement: the record takes the batch's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fm_assets.engine.spdx import LicenceError, parse

ID_FIELD = "id"
LICENSE_FIELDS = ("license", "licence")  # the first one present is the record's licence
LICENSE_CONFLICT = "license_conflict"


@dataclass(frozen=True, slots=True)
class RecordProvenance:
    source_id: str | None  # the record's own id, as text
    record_license: str | None  # the record's own licence in canonical SPDX spelling (None: it gave none)
    conflict: dict[str, Any] | None = None  # reject details when its licence is not the batch's


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value.encode("utf-8", errors="backslashreplace").decode("utf-8")  # lone surrogates escaped
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=True)


@lru_cache(maxsize=4096)  # a batch repeats a few spellings; parsing SPDX per record would dominate land
def licences_granted(licence: str) -> tuple[str, ...] | None:
    """The canonical spelling of ``licence`` and, for an ``OR``, of each alternative a user may elect; None
    when it is not an SPDX expression."""
    try:
        parsed = parse(licence)
    except LicenceError:
        return None
    alternatives = parsed.args if getattr(parsed, "operator", "").strip() == "OR" else ()
    return (str(parsed), *(str(alternative) for alternative in alternatives))


def record_provenance(meta: dict[str, Any], batch_license: str) -> RecordProvenance:
    """The id and licence a record brought in ``meta`` (its fields besides text and url), checked against the
    batch's licence."""
    source_id = _as_text(meta[ID_FIELD]) if meta.get(ID_FIELD) is not None else None
    field = next((name for name in LICENSE_FIELDS if meta.get(name) is not None), None)
    if field is None or (isinstance(meta[field], str) and not meta[field].strip()):
        return RecordProvenance(source_id, None)
    given = meta[field]
    granted = licences_granted(given.strip()) if isinstance(given, str) else None
    mine = granted[0] if granted else None
    batch = licences_granted(batch_license)
    if granted and batch and batch[0] in granted:
        return RecordProvenance(source_id, mine)
    why = "is not the batch's (nor one of its OR alternatives)" if mine else "not an SPDX licence expression"
    conflict = {"field": field, "record_license": _as_text(given), "batch_license": batch_license, "why": why}
    return RecordProvenance(source_id, mine, conflict)
