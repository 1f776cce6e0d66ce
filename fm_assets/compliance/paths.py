"""Where compliance records live under the storage root (all JSON, written atomically, never edited).

```
compliance/promotions/<batch>.json     a reviewed quarantine batch promoted to a namespace
compliance/rejections/<batch>.json     a reviewed quarantine batch rejected (never processed)
compliance/licence_policy.yaml         optional root-level licence policy (default: the package's)
compliance/revocations/<id>.json       one revocation (what, why, who, when)
compliance/revocations/<id>/report.json, report.md   its blast-radius report
```
"""

from __future__ import annotations

from fm_assets.engine.landing import PROMOTION_RECORD

ROOT = "compliance"


def promotion(batch: str) -> str:
    return PROMOTION_RECORD.format(batch=batch)  # the engine reads it too (landing.held_for_review)


def rejection(batch: str) -> str:
    return f"{ROOT}/rejections/{batch}.json"


def licence_policy() -> str:
    return f"{ROOT}/licence_policy.yaml"


def revocations_dir() -> str:
    return f"{ROOT}/revocations"


def revocation(revocation_id: str) -> str:
    return f"{ROOT}/revocations/{revocation_id}.json"


def revocation_report(revocation_id: str, extension: str) -> str:
    return f"{ROOT}/revocations/{revocation_id}/report.{extension}"
