"""Quality-model registry: models are stored and pinned by the sha256 of their ``.npz`` file, like tokenizers.

``quality_models/<sha256>.npz`` holds each registered model (weights and thresholds in one file, so the
sha256 versions both); ``quality_models/pinned.json`` names the one the filter stage uses. Registering or
training is explicit (``fm quality-model train|register``, or the ``quality_model`` asset when
``FM_QUALITY_MODEL_FILE`` / ``FM_QUALITY_TRAIN_DIR`` is set); the filter stage only reads the pin, so
computing its key never trains anything. With nothing pinned the filter runs its heuristic rules only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fm_assets.engine.hashing import sha256_bytes
from fm_assets.engine.locks import store_lock
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.text.quality_model import QualityModel, train_quality_model

log = logging.getLogger(__name__)

PINNED = "quality_models/pinned.json"
MIN_TRAINING_DOCS = 50


def model_blob(sha256: str) -> str:
    return f"quality_models/{sha256}.npz"


class QualityModelError(ValueError):
    """A quality model that cannot be trained or used; the message says why."""


@dataclass(frozen=True)
class PinnedQualityModel:
    sha256: str
    model: QualityModel
    origin: str


def register_model(store: ObjectStore, data: bytes, origin: str) -> PinnedQualityModel:
    """Store ``data`` (a model file) by its sha256 and pin it (under the ``quality_model`` lock)."""
    model = QualityModel.from_bytes(data)  # refuse a file that does not load before pinning it
    sha = sha256_bytes(data)
    with store_lock(store, "quality_model"):
        if not store.exists(model_blob(sha)):
            store.write_bytes(model_blob(sha), data)
        store.write_json(PINNED, {"sha256": sha, "origin": origin, "thresholds": model.thresholds()})
    log.info("quality model %s pinned (%s)", sha[:12], origin)
    return PinnedQualityModel(sha, model, origin)


def pinned_quality_model(store: ObjectStore) -> PinnedQualityModel | None:
    """The pinned model, or None when none was registered (reads only)."""
    if not store.exists(PINNED):
        return None
    pin = store.read_json(PINNED)
    return PinnedQualityModel(pin["sha256"], _load(store, pin["sha256"]), pin.get("origin", ""))


_LOADED: dict[tuple[str, str], QualityModel] = {}  # (root, sha256) -> model: a registered blob never changes


def _load(store: ObjectStore, sha: str) -> QualityModel:
    key = (store.root, sha)
    if key not in _LOADED:
        data = store.read_bytes(model_blob(sha))
        if sha256_bytes(data) != sha:
            raise QualityModelError(f"{model_blob(sha)} does not match its sha256: re-register the model")
        _LOADED[key] = QualityModel.from_bytes(data)
    return _LOADED[key]


def load_model_file(path: str | Path) -> QualityModel:
    return QualityModel.from_bytes(Path(path).read_bytes())


def iter_sample_texts(folder: str | Path) -> Iterator[str]:
    """Texts of ``fm sample-data`` JSONL files under ``folder``, in path order."""
    for path in sorted(Path(folder).rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)["text"]


def folder_fingerprint(folder: str | Path) -> str:
    """Names, sizes and mtimes of the JSONL files under ``folder``: whether a model trained on it is current."""
    files = sorted(Path(folder).rglob("*.jsonl"))
    listing = [(p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return sha256_bytes(json.dumps(listing).encode())[:16]


def ensure_trained(store: ObjectStore, folder: str | Path) -> tuple[PinnedQualityModel, str]:
    """Pin a model trained on ``folder``, training only when the pin is not already one trained on it as it is."""
    origin = f"trained:{folder}#{folder_fingerprint(folder)}"
    current = pinned_quality_model(store)
    if current is not None and current.origin == origin:
        return current, "unchanged"
    return register_model(store, train_from_folder(folder).to_bytes(), origin), "trained"


def train_from_folder(folder: str | Path, max_docs: int = 4000, min_words: int = 50) -> QualityModel:
    """Train on the real documentation pages under ``folder`` (evenly spaced, at most ``max_docs``)."""
    texts = [t for t in iter_sample_texts(folder) if len(t.split()) >= min_words]
    if len(texts) < MIN_TRAINING_DOCS:
        raise QualityModelError(
            f"{folder} holds {len(texts)} pages of {min_words}+ words; at least {MIN_TRAINING_DOCS} are needed "
            "(run `fm sample-data` into it first)"
        )
    step = max(1, len(texts) // max_docs)
    return train_quality_model(texts[::step][:max_docs])
