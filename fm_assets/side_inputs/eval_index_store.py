"""The built benchmark index, stored once in the root (``cache/eval_index/<content key>.npz``).

Building decontaminate's index parses every registered benchmark's files (lm-eval's few-shot YAML: seconds
per process), and every ``fm run`` process and Dagster step worker needed it. It is stored once per content
key: the sha256 of the raw bytes of every file the benchmarks are read from (``benchmarks.source_files``),
their names, n, the n-gram scheme and the source of the modules that build the index, so a package upgrade,
a changed user file, a different registry or a changed reader gets its own entry and a stale one is never
read. Each entry is one ``.npz`` (no pickles: ``allow_pickle``
is off) holding the per-benchmark key arrays, the combined array and a JSON header with the registry's
entries and the index fingerprint; a loaded entry whose fingerprint does not match its arrays is ignored
(logged) and rebuilt.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import logging
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.text.decontam import NGRAM_SCHEME, BenchmarkIndex, ContaminationIndex

log = logging.getLogger(__name__)

CACHE_PREFIX = "cache/eval_index"
FORMAT = "fm-eval-index-v1"


@dataclass(frozen=True)
class BuiltRegistry:
    """The registry's index and its entries (``Benchmark.describe()`` of each), as the stage records them."""

    index: BenchmarkIndex
    entries: tuple[dict[str, Any], ...]


# the code that turns those files into the index: a change to how passages are read, normalised or hashed
# gets a new key even where no benchmark file changed
BUILDER_MODULES = (
    "fm_assets.side_inputs.benchmarks",
    "fm_assets.transforms.text.decontam",
    "fm_assets.transforms.text.normalize",
)


def _builder_sources() -> Iterator[tuple[str, bytes]]:
    for name in BUILDER_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ValueError(f"cannot find the source of {name}")
        yield f"code:{name}", Path(spec.origin).read_bytes()


def content_key(sources: Iterable[tuple[str, bytes]], names: tuple[str, ...], n: int) -> str:
    """sha256 of the format, the n-gram scheme and n, the registry's names, every source file's bytes and
    the builder modules' source."""
    digest = hashlib.sha256(f"{FORMAT}|{NGRAM_SCHEME}|n={n}|{'|'.join(names)}|".encode())
    for label, data in (*sources, *_builder_sources()):
        digest.update(label.encode("utf-8") + b"\x00" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def entry_path(key: str) -> str:
    return f"{CACHE_PREFIX}/{key}.npz"


def dump(built: BuiltRegistry) -> bytes:
    index = built.index
    header = {
        "format": FORMAT,
        "n": index.n,
        "benchmarks": [name for name, _ in index.per_benchmark],
        "entries": list(built.entries),
        "fingerprint": index.fingerprint(),
    }
    arrays: dict[str, Any] = {f"b{i}": part.hashes for i, (_, part) in enumerate(index.per_benchmark)}
    arrays["header"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    arrays["combined"] = index.combined.hashes
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)  # arrays by name, no pickled objects
    return buffer.getvalue()


def load(data: bytes) -> BuiltRegistry:
    """An entry back; ``ValueError`` when it is not a complete, self-consistent entry of this format."""
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        header = json.loads(arrays["header"].tobytes().decode("utf-8"))
        if header.get("format") != FORMAT:
            raise ValueError(f"format {header.get('format')!r}, expected {FORMAT}")
        n = int(header["n"])
        per_benchmark = tuple(
            (str(name), ContaminationIndex(n, arrays[f"b{i}"].astype(np.uint64)))
            for i, name in enumerate(header["benchmarks"])
        )
        index = BenchmarkIndex(ContaminationIndex(n, arrays["combined"].astype(np.uint64)), per_benchmark)
    if index.fingerprint() != header["fingerprint"]:
        raise ValueError("its arrays do not match its fingerprint")
    return BuiltRegistry(index, tuple(header["entries"]))


def read(store: ObjectStore, key: str) -> BuiltRegistry | None:
    """The stored entry for ``key``, or None (absent, or unreadable: logged, the caller rebuilds it)."""
    rel = entry_path(key)
    if not store.exists(rel):
        return None
    try:
        return load(store.read_bytes(rel))
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as exc:
        log.warning("eval index %s is unreadable (%s): rebuilding it", store.uri(rel), exc)
        return None


def write(store: ObjectStore, key: str, built: BuiltRegistry) -> None:
    store.write_bytes(entry_path(key), dump(built))
