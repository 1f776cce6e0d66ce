"""Megatron-Energon metadata for a folder of our shards, so ``energon`` reads them as they are.

``write_energon_metadata(folder)`` runs Energon's own preparation (tar index + ``split.yaml``, everything
in the ``train`` split) and writes ``.nv-meta/dataset.yaml`` naming :class:`PackedRowSample` plus a
``sample_loader.py`` that decodes our members (``.tokens`` raw ids, ``.doclens`` int32, ``.json``).
Equivalent to ``energon prepare`` with these answers. Needs ``megatron-energon`` installed.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import yaml

try:
    from megatron.energon import Sample
except ImportError as exc:
    raise ImportError(
        "fm_loader.energon needs megatron-energon: pip install 'fm-data-platform[energon]'"
    ) from exc

_SAMPLE_LOADER = '''"""Written by fm_loader.energon: decodes fm_loader packed-row samples."""
import numpy as np


def sample_loader(raw: dict) -> dict:
    meta = raw["json"]
    return dict(
        tokens=np.frombuffer(raw["tokens"], dtype="<" + {"uint16": "u2", "uint32": "u4"}[meta["dtype"]]),
        doc_lens=np.frombuffer(raw["doclens"], dtype="<i4"),
        doc_ids=list(meta["doc_ids"]),
    )


def part_filter(part: str) -> bool:
    return part in ("tokens", "doclens", "json")
'''


@dataclasses.dataclass
class PackedRowSample(Sample):
    """One packed row as Energon hands it out."""

    tokens: np.ndarray
    doc_lens: np.ndarray
    doc_ids: list


def write_energon_metadata(folder: str, workers: int = 1) -> None:
    """Prepare ``folder`` (holding ``*.tar`` shards) for ``megatron.energon.get_train_dataset`` and friends."""
    from megatron.energon.epathlib import EPath
    from megatron.energon.flavors.webdataset.prepare import WebdatasetPreparator

    tars = sorted(name for name in os.listdir(folder) if name.endswith(".tar"))
    WebdatasetPreparator.prepare_dataset(
        EPath(folder), tars, split_parts_ratio=[("train", 1.0)], shuffle_seed=None, workers=workers
    )
    meta = os.path.join(folder, ".nv-meta")
    with open(os.path.join(meta, "sample_loader.py"), "w") as f:
        f.write(_SAMPLE_LOADER)
    definition = {
        "sample_type": {"__module__": "fm_loader.energon", "__class__": "PackedRowSample"},
        "sample_loader": "sample_loader.py:sample_loader",
        "part_filter": "sample_loader.py:part_filter",
    }
    with open(os.path.join(meta, "dataset.yaml"), "w") as f:
        yaml.safe_dump(definition, f, sort_keys=False)
