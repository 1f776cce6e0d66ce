"""Pipeline benchmark: per-stage wall time and MB/s, tokenize vs bare `encode_batch`, no-op re-run cost,
packing efficiency at T=2048/8192 and peak RSS at two batch sizes. Prints one JSON object.

    python bench/pipeline.py [--docs-per-package N] [--workdir DIR] [--rss-docs 2000 8000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq


def _env(root: Path, home: Path) -> None:
    os.environ.update({"FM_ROOT": str(root), "DAGSTER_HOME": str(home), "FM_PROGRESS": "0"})
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")


def _land_all(root: Path, sample: dict) -> list[str]:
    from fm_assets.engine.landing import land_batch
    from fm_assets.engine.store import ObjectStore

    store = ObjectStore(str(root))
    return [
        land_batch(
            store, Path(sample["dest"]) / pkg, source=pkg, license_id=info["license"], namespace="cloud"
        ).batch
        for pkg, info in sorted(sample["packages"].items())
    ]


def _stage_table(root: Path, batches: list[str]) -> dict:
    from fm_assets.engine.store import ObjectStore
    from fm_assets.reports.report import build_report

    per_stage: dict[str, dict] = {}
    for row in build_report(ObjectStore(str(root)), batches):
        agg = per_stage.setdefault(
            row["stage"], {"wall_seconds": 0.0, "compute_seconds": 0.0, "records_in": 0, "mb_in": 0.0}
        )
        agg["wall_seconds"] += row["wall_seconds"] or 0
        agg["compute_seconds"] += row["compute_seconds"] or 0
        agg["records_in"] += row["records_in"]
    return per_stage


def _stage_input_mb(root: Path, batches: list[str]) -> dict[str, float]:
    """Input size per stage: the upstream stage's output parquet bytes (landed bytes for land)."""
    from fm_assets.engine.refs import read_success
    from fm_assets.engine.store import ObjectStore
    from fm_assets.stages.registry import TEXT_STAGES

    store = ObjectStore(str(root))
    sizes = {}
    for stage in TEXT_STAGES:
        total = 0
        for batch in batches:
            if stage.upstream is None:
                total += read_success(store, "land", batch).extra.get("bytes_in", 0)
            else:
                total += read_success(store, stage.upstream, batch).counts.bytes_out
        sizes[stage.name] = total / 1e6
    return sizes


def _tokenize_vs_bare(root: Path, batches: list[str]) -> dict:
    from fm_assets.engine.refs import read_success
    from fm_assets.engine.store import ObjectStore
    from fm_assets.side_inputs.tokenizer import TokenizerRegistry

    store = ObjectStore(str(root))
    registry = TokenizerRegistry(store)
    tokenizer = registry.get(registry.pinned_sha()).tokenizer
    texts = []
    stage_seconds = 0.0
    for batch in batches:
        for part in read_success(store, "decontaminate", batch).parts:
            texts.extend(pq.read_table(store.local_path(part), columns=["text"])["text"].to_pylist())
        stage_seconds += read_success(store, "tokenize", batch).seconds
    started = time.perf_counter()
    for i in range(0, len(texts), 1024):
        tokenizer.encode_batch(texts[i : i + 1024], add_special_tokens=False)
    bare = time.perf_counter() - started
    mb = sum(len(t.encode()) for t in texts) / 1e6
    return {
        "docs": len(texts),
        "mb": round(mb, 2),
        "bare_encode_batch_seconds": round(bare, 3),
        "stage_seconds": round(stage_seconds, 3),
        "stage_over_bare_throughput": round(bare / stage_seconds, 3) if stage_seconds else None,
        "target": ">= 0.8",
    }


def _packing(root: Path, batches: list[str]) -> dict:
    from fm_assets.engine.refs import read_success
    from fm_assets.engine.store import ObjectStore
    from fm_assets.transforms.tokens.packing import pack_documents

    store = ObjectStore(str(root))
    result = {}
    for seq_len in (2048, 8192):
        tokens = rows = 0
        for batch in batches:
            lengths = []
            for part in read_success(store, "tokenize", batch).parts:
                lengths.extend(
                    pq.read_table(store.local_path(part), columns=["n_tokens"])["n_tokens"].to_pylist()
                )
            bins = pack_documents(lengths, seq_len)
            tokens += sum(lengths)
            rows += len(bins)
        result[f"T={seq_len}"] = {
            "rows": rows,
            "tokens": tokens,
            "efficiency": round(tokens / (rows * seq_len), 5),
        }
    result["target"] = ">= 0.999"
    return result


def _rss_child(sample_dir: Path, docs: int, workdir: Path, tokenizer_file: Path | None = None) -> dict:
    """Peak RSS of a fresh process running every stage on one batch of ``docs`` documents.

    A fixed tokenizer is passed so that BPE training (whose sample grows with the batch up to its cap)
    does not count as stage memory."""
    code = f"""
import json, os, resource, sys, time
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
src = Path({str(workdir)!r}) / "rss-src-{docs}"
src.mkdir(parents=True, exist_ok=True)
lines = []
for path in sorted(Path({str(sample_dir)!r}).rglob("*.jsonl")):
    lines.extend(path.read_text().splitlines())
lines = (lines * (1 + {docs} // max(1, len(lines))))[:{docs}]
with open(src / "docs.jsonl", "w") as out:
    for i, line in enumerate(lines):
        record = json.loads(line)  # text and url only: the packages' own licences differ from the batch's
        record = {{"text": record["text"] + f"\\n\\nrevision {{i}}", "url": record.get("url")}}
        out.write(json.dumps(record) + "\\n")
os.environ.update(FM_ROOT=str(Path({str(workdir)!r}) / "rss-root-{docs}"), DAGSTER_HOME=str(Path({str(workdir)!r}) / "rss-home-{docs}"), FM_PROGRESS="0", FM_NEAR_DEDUP="0")
if {str(tokenizer_file or "")!r}:
    os.environ["FM_TOKENIZER_FILE"] = {str(tokenizer_file or "")!r}
Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
from fm_assets.engine.landing import land_batch
from fm_assets.engine.store import ObjectStore
from fm_assets.cli.runner import run_batches
land_batch(ObjectStore(os.environ["FM_ROOT"]), src, source="rss", license_id="MIT", namespace="cloud")
t = time.perf_counter()
failures = run_batches(release=False)
Path({str(workdir)!r}, "rss-{docs}.json").write_text(json.dumps({{"failures": failures, "seconds": time.perf_counter() - t, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    # run as a script file: under `python -c`, an import inside great-expectations -> pyspark exits the process
    script = workdir / f"rss-{docs}.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=3600)
    result_file = workdir / f"rss-{docs}.json"
    if proc.returncode != 0 or not result_file.exists():
        return {"docs": docs, "error": proc.stderr[-2000:]}
    result = json.loads(result_file.read_text())
    return {"docs": docs, **result}


def _export_tokenizer(root: Path, workdir: Path) -> Path:
    from fm_assets.engine.store import ObjectStore
    from fm_assets.side_inputs.tokenizer import TokenizerRegistry

    registry = TokenizerRegistry(ObjectStore(str(root)))
    out = workdir / "tokenizer.json"
    out.write_bytes(registry.store.read_bytes(f"tokenizers/{registry.pinned_sha()}.json"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--docs-per-package", type=int, default=0, help="cap per package; 0 = the whole sample corpus"
    )
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--rss-docs", type=int, nargs=2, default=[2000, 8000])
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="fm-bench-"))
    from fm_assets.sample_data import fetch_sample_data

    sample = fetch_sample_data(workdir / "sample", max_docs=args.docs_per_package or None, progress=False)
    root = workdir / "root"
    _env(root, workdir / "dagster_home")
    from fm_assets.cli.runner import run_batches

    batches = _land_all(root, sample)
    started = time.perf_counter()
    failures = run_batches(batches)
    first = time.perf_counter() - started
    stages = _stage_table(root, batches)
    input_mb = _stage_input_mb(root, batches)
    for name, row in stages.items():
        row["mb_in"] = round(input_mb[name], 3)
        row["mb_per_s"] = (
            round(input_mb[name] / row["compute_seconds"], 3) if row["compute_seconds"] else None
        )
    started = time.perf_counter()
    failures_noop = run_batches(batches)
    noop = time.perf_counter() - started
    result = {
        "corpus": {
            "source": sample["source"],
            "docs": sample["total_docs"],
            "mb": round(sample["total_bytes"] / 1e6, 2),
            "batches": len(batches),
        },
        "failures": {**failures, **failures_noop},
        "first_run_seconds": round(first, 2),
        "noop_rerun_seconds": round(noop, 2),
        "noop_fraction": round(noop / first, 4),
        "noop_target": "<= 0.05",
        "stages": stages,
        "tokenize_vs_bare": _tokenize_vs_bare(root, batches),
        "packing": _packing(root, batches),
        "peak_rss": [
            _rss_child(workdir / "sample", n, workdir, _export_tokenizer(root, workdir))
            for n in args.rss_docs
        ],
        "bench_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "numpy": np.__version__,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
