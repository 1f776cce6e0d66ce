"""Benchmark the tokenize stage's encoders on real text; prints one JSON object.

For every backend ``build_encoder`` may choose (fastokens, gigatoken, tiktoken) and HF ``tokenizers``:
MB of UTF-8 input per CPU-second through the stage's own path (``encode_flat`` on batches of
``ENCODE_BATCH_DOCS`` documents), its ratio to HF measured in the same run, and how many documents get ids
that differ from HF's (must be 0 for the backend ``build_encoder`` chooses; the exit status is 1 otherwise).
``fastest_identical`` names the fastest backend with no differing document (by median), to compare with
``preference`` (``encoder.PREFERENCE``, the order ``build_encoder`` tries).

Input: ``--data DIR`` holds sample-data JSONL (``fm sample-data``) or Parquet files with a ``text`` column
(e.g. a decontaminate output, the stage's real input); without it the Debian documentation sample is
fetched (``fetch_sample_data``) into ``--cache`` or a temporary folder. Tokenizer: ``--tokenizer FILE``, or
a byte-level BPE trained like the ``tokenizer`` asset does (``TokenizerRegistry.train_bpe``, 8192 tokens,
the first 20000 documents).

CPU time is ``time.process_time`` (every thread of this process), so numbers are per core and hold on a
shared machine better than wall time; ``--threads 1`` (default) also keeps the Rust thread pools to one
thread so no pool spins. Each backend is timed ``--repeats`` times after a warm-up batch; best and median
are reported. Every pass runs on a freshly built encoder, as each partition does, so no pass
reuses the word cache of the one before.

Usage: python bench/tokenizer_speed.py [--data DIR] [--cache DIR] [--tokenizer FILE] [--max-mb 64] [--repeats 3]
"""

from __future__ import annotations

import os
import sys

# This file is named like the standard library's ``tokenize`` (which logging, linecache, ... import): take
# its folder off the import path before anything imports that module, or it would import this script.
_HERE = os.path.dirname(os.path.realpath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) != _HERE]

import argparse  # noqa: E402

_ARGS = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
_ARGS.add_argument("--data", type=str, default=None, help="folder of *.jsonl / *.parquet with a text field")
_ARGS.add_argument(
    "--cache", type=str, default=None, help="where to fetch the sample when --data is not given"
)
_ARGS.add_argument(
    "--tokenizer", type=str, default=None, help="tokenizer.json (default: train one on the data)"
)
_ARGS.add_argument("--max-mb", type=float, default=64.0, help="use at most this many MB of text")
_ARGS.add_argument("--repeats", type=int, default=3)
_ARGS.add_argument("--threads", type=int, default=1, help="Rust thread-pool size (0: the libraries' default)")
_ARGS.add_argument("--backends", nargs="*", default=None, help="subset of backends to time (default: all)")

if __name__ == "__main__":
    _OPTIONS = _ARGS.parse_args()
    if _OPTIONS.threads:  # before any tokenizer library starts its pool
        os.environ["RAYON_NUM_THREADS"] = str(_OPTIONS.threads)
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if _OPTIONS.threads > 1 else "false"

import functools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fm_assets.engine.store import ObjectStore  # noqa: E402
from fm_assets.sample_data import fetch_sample_data  # noqa: E402
from fm_assets.side_inputs.tokenizer import TokenizerRegistry, TokenizerSpec  # noqa: E402
from fm_assets.stages.tokenize import ENCODE_BATCH_DOCS  # noqa: E402
from fm_assets.transforms.tokens.backends import BACKENDS, TokenEncoder  # noqa: E402
from fm_assets.transforms.tokens.encoder import HF, PREFERENCE, HFEncoder, build_encoder  # noqa: E402
from fm_assets.transforms.tokens.flat import Flat, doc  # noqa: E402
from fm_assets.transforms.tokens.probes import CURATED  # noqa: E402
from fm_assets.transforms.tokens.tokenizer_json import UnsupportedTokenizer, byte_level_bpe  # noqa: E402

log = logging.getLogger("bench.tokenize")
WARM_UP = list(CURATED)


def load_texts(folder: Path, max_bytes: int) -> list[str]:
    """Texts of every *.jsonl / *.parquet under ``folder`` (sorted paths), up to ``max_bytes`` of UTF-8."""
    texts: list[str] = []
    total = 0
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".jsonl":
            batch = [
                json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line
            ]
        elif path.suffix == ".parquet":
            batch = pq.read_table(path, columns=["text"])["text"].to_pylist()
        else:
            continue
        for text in batch:
            texts.append(text)
            total += len(text.encode("utf-8"))
            if total >= max_bytes:
                return texts
    return texts


def tokenizer_for(texts: list[str], path: str | None, workdir: Path) -> tuple[Tokenizer, str]:
    if path:
        return Tokenizer.from_file(path), path
    spec = TokenizerSpec()
    registry = TokenizerRegistry(ObjectStore(str(workdir / "store")))
    sha = registry.train_bpe(texts[: spec.train_sample_docs], spec.train_vocab_size)
    return registry.get(sha).tokenizer, f"trained byte-level BPE {sha[:12]} ({spec.train_vocab_size} tokens)"


def fresh_hf(tokenizer_json: str) -> TokenEncoder:
    return HFEncoder(Tokenizer.from_str(tokenizer_json))


def encode_all(encoder: TokenEncoder, texts: list[str]) -> list[Flat]:
    return [
        encoder.encode_flat(texts[i : i + ENCODE_BATCH_DOCS]) for i in range(0, len(texts), ENCODE_BATCH_DOCS)
    ]


def differing_docs(reference: list[Flat], found: list[Flat]) -> int:
    differs = 0
    for expected, got in zip(reference, found, strict=True):
        if len(expected[1]) != len(got[1]):  # a different document count: the whole batch differs
            differs += len(expected[1]) - 1
            continue
        for i in range(len(expected[1]) - 1):
            differs += doc(expected, i).tobytes() != doc(got, i).tobytes()
    return differs


def time_backend(
    make: Callable[[], TokenEncoder], texts: list[str], repeats: int
) -> tuple[list[float], list[float], list[Flat]]:
    """CPU and wall seconds of ``repeats`` passes over ``texts``, each on a freshly built encoder.

    A fresh encoder per pass is what the stage sees (one encoder per partition, every document encoded
    once): re-encoding the same texts on one encoder would time its word cache, not its BPE. Each is warmed
    up on the probe strings first (lazy initialisation), which are not part of the timed text.
    """
    cpu, wall = [], []
    out: list[Flat] = []
    for _ in range(repeats):
        encoder = make()
        encoder.encode_flat(WARM_UP)
        cpu_start, wall_start = time.process_time(), time.perf_counter()
        out = encode_all(encoder, texts)
        cpu.append(time.process_time() - cpu_start)
        wall.append(time.perf_counter() - wall_start)
    return cpu, wall, out


def version_of(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def main(options: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="fm-bench-tokenize-") as tmp:
        workdir = Path(tmp)
        if options.data:
            data, source = Path(options.data), options.data
        else:
            data = Path(options.cache) if options.cache else workdir / "sample"
            summary = fetch_sample_data(data, progress=False, deb_dir=data / "_debs")
            source = f"fetch_sample_data ({summary['source']}: {', '.join(sorted(summary['packages']))})"
        texts = load_texts(data, int(options.max_mb * 1e6))
        n_bytes = sum(len(text.encode("utf-8")) for text in texts)
        if not texts:
            raise SystemExit(f"no text found under {data}")
        tokenizer, tokenizer_origin = tokenizer_for(texts, options.tokenizer, workdir)

    load_before = os.getloadavg()
    build_started = time.perf_counter()
    chosen = build_encoder(tokenizer)
    result: dict[str, Any] = {
        "input": {"source": source, "docs": len(texts), "mb": round(n_bytes / 1e6, 3)},
        "tokenizer": tokenizer_origin,
        "chosen": {**chosen.describe(), "build_seconds": round(time.perf_counter() - build_started, 3)},
        "backends": {},
    }
    try:
        spec = byte_level_bpe(json.loads(tokenizer.to_str()))
    except UnsupportedTokenizer:
        spec = None
    names = [HF, *(options.backends or BACKENDS)]
    reference: list[Flat] = []
    hf_rate = hf_median = None
    text = tokenizer.to_str()
    for name in dict.fromkeys(names):
        entry: dict[str, Any] = {"version": version_of("tokenizers" if name == HF else name)}
        if name == HF:
            make: Callable[[], TokenEncoder] = functools.partial(fresh_hf, text)
        else:
            # time the backend even where build_encoder would not pick it (an unsupported feature is
            # reported, not bypassed): build it directly when the structure allows
            if spec is None or spec.features - BACKENDS[name].supports:
                entry["error"] = chosen.rejected.get(name, "tokenizer.json not supported")
                result["backends"][name] = entry
                continue
            make = functools.partial(BACKENDS[name].build, text, spec)
            try:
                make()
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                result["backends"][name] = entry
                continue
        cpu, wall, out = time_backend(make, texts, options.repeats)
        rate, median = n_bytes / 1e6 / min(cpu), n_bytes / 1e6 / statistics.median(cpu)
        if name == HF:
            reference, hf_rate, hf_median = out, rate, median
        entry.update(
            {
                "mb_per_cpu_s": round(rate, 2),
                "mb_per_cpu_s_median": round(median, 2),
                "mb_per_wall_s": round(n_bytes / 1e6 / min(wall), 2),
                "ratio_vs_hf": round(rate / hf_rate, 2) if hf_rate else None,
                "ratio_vs_hf_median": round(median / hf_median, 2) if hf_median else None,
                "tokens": int(sum(len(flat[0]) for flat in out)),
                "docs_differing_from_hf": 0 if name == HF else differing_docs(reference, out),
                "cpu_seconds": [round(c, 3) for c in cpu],
            }
        )
        result["backends"][name] = entry
        log.info("%s: %.2f MB/CPU-s", name, rate)
    identical = {
        name: entry["mb_per_cpu_s_median"]
        for name, entry in result["backends"].items()
        if entry.get("docs_differing_from_hf") == 0
    }
    result["fastest_identical"] = max(identical, key=identical.__getitem__) if identical else None
    result["preference"] = list(PREFERENCE)
    result["machine"] = {
        "cpus": os.cpu_count(),
        "threads": options.threads or "library default",
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "numpy": version_of("numpy"),
    }
    print(json.dumps(result, indent=2))
    chosen_entry = result["backends"].get(chosen.backend, {})
    return 0 if chosen_entry.get("docs_differing_from_hf", 0) == 0 else 1


if __name__ == "__main__":
    sys.exit(main(_OPTIONS))
