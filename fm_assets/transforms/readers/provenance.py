"""A record's own provenance: the id and licence its source gave it, kept beside the batch's.

``land`` stamps every document with the batch's licence and an id of its own (the CAS hash and record
index); a record that brings an ``id`` keeps it as ``source_id``, and one that brings a ``license`` (or
``licence``) keeps it as ``record_license``. A record licence that is not the batch's, compared in canonical
SPDX spelling, or that is not SPDX at all, is a conflict: the batch's declaration must not silently relabel
it, so ``land`` quarantines the record (reject ``license_conflict`` with both licences) for a reviewer to
re-land it under the right licence. An absent, null or blank record licence is no statement: the record
takes the batch's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fm_assets.engine.spdx import LicenceError, normalize

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
def canonical(licence: str) -> str | None:
    """``licence`` in canonical SPDX spelling, or None when it is not an SPDX expression."""
    try:
        return normalize(licence)
    except LicenceError:
        return None


def record_provenance(meta: dict[str, Any], batch_license: str) -> RecordProvenance:
    """The id and licence a record brought in ``meta`` (its fields besides text and url), checked against the
    batch's licence."""
    source_id = _as_text(meta[ID_FIELD]) if meta.get(ID_FIELD) is not None else None
    field = next((name for name in LICENSE_FIELDS if meta.get(name) is not None), None)
    if field is None or (isinstance(meta[field], str) and not meta[field].strip()):
        return RecordProvenance(source_id, None)
    given = meta[field]
    mine = canonical(given.strip()) if isinstance(given, str) else None
    if mine is not None and mine == canonical(batch_license):
        return RecordProvenance(source_id, mine)
    why = "differs from the batch's" if mine is not None else "not an SPDX licence expression"
    conflict = {"field": field, "record_license": _as_text(given), "batch_license": batch_license, "why": why}
    return RecordProvenance(source_id, mine, conflict)
