"""The eval n-gram registry: a side input of decontaminate (which texts no training document may overlap).

By default the bundled Python-tutorial passages (``fm_assets/data``); ``FM_EVAL_REGISTRY_FILE`` names a
JSONL (optionally gzipped) file of ``{"text": ...}`` objects instead. The index fingerprint is the version.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fm_assets.transforms.text.decontam import DEFAULT_N, ContaminationIndex, load_default_eval_index


class EvalRegistryError(ValueError):
    """The eval registry file cannot be used; the message says why."""


@dataclass(frozen=True)
class EvalRegistry:
    path: str | None = None
    n: int = DEFAULT_N

    def index(self) -> ContaminationIndex:
        if not self.path:
            return load_default_eval_index(self.n)
        file = Path(self.path)
        if not file.is_file():
            raise EvalRegistryError(f"eval registry {self.path} does not exist (FM_EVAL_REGISTRY_FILE)")
        return _index_cached(str(file.resolve()), file.stat().st_mtime_ns, self.n)

    def describe(self) -> str:
        return self.path or "bundled:eval_python_tutorial"


@lru_cache(maxsize=4)
def _index_cached(path: str, mtime_ns: int, n: int) -> ContaminationIndex:
    raw = Path(path).read_bytes()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    texts = []
    for number, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            texts.append(json.loads(line)["text"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise EvalRegistryError(
                f"{path}:{number}: expected a JSON object with a 'text' field ({exc})"
            ) from exc
    if not texts:
        raise EvalRegistryError(f"{path} holds no eval texts")
    return ContaminationIndex.build(texts, n=n)
