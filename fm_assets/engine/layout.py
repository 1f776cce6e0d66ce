"""The storage layout under one root: every path the platform reads or writes is built here.

```
landing/<batch>/files/<rel>        raw files as delivered; landing/<batch>/_batch.json written last
cas/<h[:2]>/<h>                    raw bytes by sha256 (write-once)
stages/<stage>/<batch>/<key>/      one stage output: part-*.parquet, rejects-*.parquet, _units/, _SUCCESS.json
refs/<stage>/<batch>.json          the only mutable files: which output folder is current
tokenizers/<sha>.json, pinned.json registered tokenizers and the pin
datasets/<name>/<version>/         released dataset versions (manifest.json, card.json); LATEST.json
locks/<name>.lock                  advisory locks for cross-batch state (local roots)
```
"""

from __future__ import annotations

import posixpath

BATCH_MANIFEST = "_batch.json"
SUCCESS = "_SUCCESS.json"
CHECKS = "_checks.json"
CHECK_COSTS = "_checks_cost.json"
PINNED_TOKENIZER = "tokenizers/pinned.json"
AUX_OUTPUTS = "aux_outputs"  # a stage output's artifact: the auxiliary outputs it used (engine.aux_output)


def landing_dir() -> str:
    return "landing"


def batch_manifest(batch: str) -> str:
    return f"landing/{batch}/{BATCH_MANIFEST}"


def landed_file(batch: str, rel: str) -> str:
    return f"landing/{batch}/files/{rel}"


def landed_rel_in_batch(path: str) -> str:
    """The path inside the batch of a ``landed_file`` path."""
    return path.split("/files/", 1)[1]


def cas_object(sha256: str) -> str:
    return f"cas/{sha256[:2]}/{sha256}"


def stage_output(stage: str, batch: str, key: str) -> str:
    return f"stages/{stage}/{batch}/{key}"


def key_of(prefix: str) -> str:
    """The stage key of an output folder."""
    return prefix.rsplit("/", 1)[-1]


def normalize_path(rel: str) -> str:
    """``rel`` with ``..`` and ``.`` resolved (release manifests point at shards relative to themselves)."""
    return posixpath.normpath(rel)


def stage_output_of(rel: str) -> tuple[str, str] | None:
    """(stage, batch) of a path inside a stage output folder, else None."""
    parts = rel.strip("/").split("/")
    if len(parts) >= 5 and parts[0] == "stages":
        return parts[1], parts[2]
    return None


def in_output(prefix: str, name: str) -> str:
    return f"{prefix}/{name}"


def unit_marker(prefix: str, unit_id: str) -> str:
    return f"{prefix}/_units/{unit_id}.json"


def success_marker(prefix: str) -> str:
    return f"{prefix}/{SUCCESS}"


def check_outcomes(prefix: str) -> str:
    return f"{prefix}/{CHECKS}"


def check_costs(prefix: str) -> str:
    return f"{prefix}/{CHECK_COSTS}"


def part_name(unit_id: str, index: int | None = None) -> str:
    return f"part-{unit_id}.parquet" if index is None else f"part-{unit_id}-{index:04d}.parquet"


def rejects_name(unit_id: str) -> str:
    return f"rejects-{unit_id}.parquet"


def unit_of_part(part: str) -> str:
    """``.../part-<unit>.parquet`` -> ``<unit>``."""
    return part.rsplit("/", 1)[-1].removeprefix("part-").removesuffix(".parquet")


def rescan_notes(stage: str, batch: str) -> str:
    """Notes of files whose manifest line index a unit found stale: the stage's next plan reads them again."""
    return f"stages/{stage}/{batch}/_rescan"


def refs_dir(stage: str) -> str:
    return f"refs/{stage}"


def stage_ref(stage: str, batch: str) -> str:
    return f"refs/{stage}/{batch}.json"


def stage_failure(stage: str, batch: str) -> str:
    """Why the stage's last materialization for the batch failed (absent once one succeeds)."""
    return f"failures/{stage}/{batch}.json"


def tokenizer_blob(sha256: str) -> str:
    return f"tokenizers/{sha256}.json"


def dataset_dir(name: str, version: str) -> str:
    return f"datasets/{name}/{version}"


def dataset_latest(name: str) -> str:
    return f"datasets/{name}/LATEST.json"


def dataset_manifest(name: str, version: str) -> str:
    return f"datasets/{name}/{version}/manifest.json"


def dataset_card(name: str, version: str) -> str:
    return f"datasets/{name}/{version}/card.json"


def lock_file(name: str) -> str:
    return f"locks/{name}.lock"
