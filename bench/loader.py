"""Benchmark fm_loader against its peers on the same rows, in one run; prints one JSON object.

Usage: ``python bench/loader.py [--rows 16384] [--seq-len 2048] [--shards 64] [--batch 64] [--repeats 7]``;
``--trainer-only`` runs only the trainer runs below.

Readers, each over the same ``rows x seq_len`` uint16 tokens, from page cache (one warm-up pass each first):

* ``fm_loader``: an epoch of ``Loader(..., prefetch=0)``: shuffled, checksummed, and every batch the full dict
  (input_ids, labels, loss_mask, position_ids, segment_ids, cu_seqlens, num_docs, valid_token_count,
  sample_ids); also with int64 ``input_ids`` and with the prefetch thread;
* ``webdataset``: ``wds.WebDataset`` over the same tars, each sample's tokens decoded (no batching);
* ``mosaic_streaming``: MosaicML ``StreamingDataset`` over the same rows written as MDS (``ndarray:uint16``),
  read in order by index (its fastest path here; no shuffling, no batching);
* ``memcpy``: one ``np.copyto`` of all the token bytes.

Timing: the readers are run in rounds, one pass of each per round in turn, for ``--repeats`` rounds. Every ratio
is computed within a round (so that a burst of load on a shared machine hits both sides of it) and the median
over the rounds is reported, with the median and best seconds of each reader. ``load_avg`` shows how busy the
machine was; ``cpu_time_ratios`` are the same ratios from this process's CPU time, steadier when it is busy.

Units: ``bytes_per_s`` is shard token bytes per second (2 bytes a token), the unit shared by every reader;
``fraction_of_memcpy`` compares fm_loader's (full batch dicts) with memcpy's. ``output_bytes_per_s`` counts
the bytes of the batch tensors fm_loader produced (about 21 bytes a token with int32 ``input_ids``).

Trainer runs (``trainer_runs``): an epoch of a two-source mixture (the rows above, plus as many rows that
carry two per-token columns), as a trainer sees it: ``plain`` (no extra columns, built in this process by
the prefetch thread), ``enriched`` (``extra_columns={"depth": -1, "chunk": 0}``: the second source's values,
the fill for the first's) and ``workers`` (the plain batches built by ``--workers`` DataLoader processes).
After one warm-up epoch each, every config runs ``--trainer-repeats`` times and the run with the median token
rate is reported. Each reports B, T, iterations and the loader's own metrics twice: ``loader_bound`` (the trainer takes no
time: token rate is the loader's throughput, and it stalls on every batch) and ``with_step`` (a
``--step-ms`` sleep per batch stands in for the training step: the stall is what a trainer that fast
would lose).

Start-up: ``startup`` builds ``Loader`` on manifests of 10k and 100k shards and plans the first batch (no shard
I/O: the shards do not exist), and on a 100k-shard manifest whose entries all name real shard files builds the
``Loader`` and its first batch.

MosaicML streaming pins versions that may not fit this environment (``numpy<2.2``); install it apart
(``pip install --no-deps --target DIR mosaicml-streaming catalogue brotli python-snappy cramjam zstd``) and
point ``--streaming-path DIR`` (or ``FM_BENCH_STREAMING_PATH``) at it. ``transformers`` and ``torchvision``,
which it imports but does not use for MDS, are stubbed when absent.
"""

from __future__ import annotations

import os
import sys

# Run as ``python bench/loader.py``, this folder comes first on sys.path, where a sibling script named like a
# standard module (``bench/tokenizer_speed.py``) would shadow it: the folder is not needed on the path.
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import argparse
import importlib.abc
import importlib.machinery
import json
import resource
import statistics
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fm_loader import DatasetManifest, Loader, PackedRow, ShardEntry, encode_shard

VOCAB = 50257


def build(
    folder: str, rows: int, seq_len: int, shards: int, columns: bool = False, name: str = "bench"
) -> tuple[str, list[np.ndarray]]:
    """Write ``shards`` shards of ``rows`` random rows (four documents each) and their manifest; with
    ``columns`` every row also carries per-token ``depth`` and ``chunk`` columns."""
    rng = np.random.default_rng(1 if columns else 0)
    per_shard = rows // shards
    entries, all_rows = [], []
    for s in range(shards):
        packed = []
        for _ in range(per_shard):
            tokens = rng.integers(0, VOCAB, seq_len, dtype=np.uint16)
            cuts = np.sort(rng.choice(np.arange(1, seq_len), 3, replace=False))
            lens = np.diff([0, *cuts, seq_len]).tolist()
            row = PackedRow(tokens, lens, ["x:0"] * 4)
            if columns:
                row.columns = {"depth": rng.integers(0, 32, seq_len), "chunk": np.repeat(np.arange(4), lens)}
            packed.append(row)
            all_rows.append(tokens)
        enc = encode_shard(packed, f"{name}-{s:06d}", seq_len, VOCAB)
        for file_name, data in enc.files.items():
            with open(os.path.join(folder, file_name), "wb") as f:
                f.write(data)
        entries.append(ShardEntry.from_info(enc.info))
    manifest = DatasetManifest(name, "v1", seq_len, VOCAB, "bench-tok", "bench", entries)
    path = os.path.join(folder, f"{name}.json")
    manifest.save(path)
    return path, all_rows


def trainer_run(mixture: dict[str, Any], batch: int, step_s: float, **options: Any) -> dict[str, Any]:
    """One epoch as a trainer consumes it (``step_s`` of "training" per batch); the loader's metrics."""
    loader = Loader(mixture, global_batch_size=batch, **options)
    shape = None
    cpu0 = time.process_time()
    for out in loader:
        shape = shape or tuple(out["input_ids"].shape)
        if step_s:
            time.sleep(step_s)
    cpu_s = time.process_time() - cpu0
    m = loader.metrics()
    loader.close()
    assert shape is not None
    return {
        "B": shape[0],
        "T": shape[1],
        "iterations": int(m["batches"]),
        "keys": len(out),
        "tokens_per_s": m["tokens_per_s"],
        "rows_per_s": m["rows_per_s"],
        "input_stall_s": m["input_stall_s"],
        "input_stall_fraction": m["input_stall_fraction"],
        "queue_depth_mean": m["queue_depth_mean"],
        "build_s": m["build_s"],
        "elapsed_s": m["elapsed_s"],
        "cpu_s": cpu_s,  # this process only (not the workers'); includes the simulated step's few microseconds
        "tokens_per_cpu_s": m["tokens"] / cpu_s if cpu_s else 0.0,
    }


def trainer_runs(folder: str, plain: str, args: argparse.Namespace) -> dict[str, Any]:
    """plain / enriched / multi-worker epochs of a two-source mixture, loader-bound and with a step."""
    enriched, _ = build(folder, args.rows, args.seq_len, args.shards, columns=True, name="enriched")
    mixture = {"sources": [{"manifest": plain}, {"manifest": enriched}]}
    configs: dict[str, dict[str, Any]] = {
        "plain": {"prefetch": 2},
        "enriched": {"prefetch": 2, "extra_columns": {"depth": -1, "chunk": 0}},
        "workers": {"num_workers": args.workers, "prefetch": 2},
    }
    out: dict[str, Any] = {
        "step_ms": args.step_ms,
        "num_workers": args.workers,
        "sources": 2,
        "repeats": args.trainer_repeats,
    }
    for options in configs.values():  # warm-up: page cache, first maps, worker start-up paths
        trainer_run(mixture, args.batch, 0.0, **options)
    for name, options in configs.items():
        out[name] = {
            "loader_bound": median_run(
                [trainer_run(mixture, args.batch, 0.0, **options) for _ in range(args.trainer_repeats)]
            ),
            "with_step": median_run(
                [
                    trainer_run(mixture, args.batch, args.step_ms / 1000, **options)
                    for _ in range(args.trainer_repeats)
                ]
            ),
        }
    return out


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median token rate (its own numbers, so they stay consistent with each other)."""
    return sorted(runs, key=lambda run: run["tokens_per_s"])[len(runs) // 2]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fm_pass(path: str, gbs: int, **options: Any) -> tuple[int, int]:
    """(tokens, bytes of batch tensors) of one epoch; the batches are dropped as they come, like a trainer."""
    loader = Loader(path, global_batch_size=gbs, **{"prefetch": 0, **options})
    out_bytes = 0
    for batch in loader:
        if not out_bytes:
            out_bytes = sum(t.numel() * t.element_size() for t in batch.values())
    return int(loader.metrics()["tokens"]), out_bytes * int(loader.metrics()["batches"])


def wds_pass(tars: list[str]) -> int:
    import webdataset as wds

    tokens = 0
    for sample in wds.WebDataset(tars, shardshuffle=False):  # pyright: ignore[reportAttributeAccessIssue]
        tokens += len(np.frombuffer(sample["tokens"], dtype="<u2"))
    return tokens


def memcpy_pass(src: np.ndarray, dst: np.ndarray) -> int:
    np.copyto(dst, src)
    return src.size


class _Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty modules for ``roots`` (and their submodules): any attribute is a dummy class."""

    def __init__(self, roots: set[str]) -> None:
        self.roots = roots

    def find_spec(
        self, name: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def attr(name: str) -> type:
            if name.startswith("__"):
                raise AttributeError(name)
            return type(name, (dict,), {})

        module.__getattr__ = attr  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def import_streaming(extra_path: str | None) -> Any:
    """Import MosaicML ``streaming``, stubbing ``transformers``/``torchvision`` if they are missing."""
    if extra_path and extra_path not in sys.path:
        sys.path.append(extra_path)
    missing = set()
    for root in ("transformers", "torchvision"):
        try:
            __import__(root)
        except Exception:  # absent, or built against another torch
            missing.add(root)
    if missing:
        sys.meta_path.insert(0, _Stubs(missing))
    import streaming  # pyright: ignore[reportMissingImports]  # optional, see --streaming-path

    return streaming


def mds_pass(streaming: Any, folder: str) -> int:
    ds = streaming.StreamingDataset(local=folder, shuffle=False, batch_size=1)
    tokens = 0
    for i in range(len(ds)):
        tokens += len(ds[i]["tokens"])
    return tokens


def rounds(
    readers: dict[str, Callable[[], Any]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each reader's pass: ``repeats`` rounds of one pass of each reader in turn (after
    one warm-up pass each). CPU time (of this process) is the steadier measure on a busy machine."""
    for fn in readers.values():
        fn()
    wall: dict[str, list[float]] = {name: [] for name in readers}
    cpu: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(repeats):
        for name, fn in readers.items():
            c0 = time.process_time()
            wall[name].append(timed(fn)[0])
            cpu[name].append(time.process_time() - c0)
    return wall, cpu


def ratio(times: dict[str, list[float]], slow: str, fast: str) -> float:
    """Median over rounds of ``slow``'s time over ``fast``'s."""
    return statistics.median(a / b for a, b in zip(times[slow], times[fast], strict=True))


def synthetic_manifest(folder: str, shards: int, real: ShardEntry | None = None, seq_len: int = 2048) -> str:
    """A manifest in ``folder`` of ``shards`` entries of 4096 rows; with ``real`` (an entry of a shard written
    in ``folder``), every entry names that shard's files."""
    if real is None:
        entries = [
            ShardEntry(f"s/{i:07d}.tar", f"{i:064x}", 4096, 4096 * 2048, max_docs_per_row=4)
            for i in range(shards)
        ]
    else:
        entries = [real] * shards
    path = os.path.join(folder, f"synthetic-{shards}-{'real' if real else 'plan'}.json")
    DatasetManifest("synthetic", "v1", seq_len, VOCAB, "tok", "c", entries).save(path)
    return path


def startup(folder: str, real: ShardEntry, seq_len: int, repeats: int) -> list[dict[str, Any]]:
    """Median seconds to build ``Loader`` and plan (or build) its first batch, on large manifests."""
    out = []
    for shards, with_files in ((10_000, False), (100_000, False), (100_000, True)):
        path = synthetic_manifest(folder, shards, real if with_files else None, seq_len)

        def start(path: str = path, with_files: bool = with_files) -> None:
            loader = Loader(path, global_batch_size=512, prefetch=0)
            if with_files:
                next(iter(loader))
            else:
                loader._refs(0, 0)
            loader.close()

        times = [timed(start)[0] for _ in range(repeats)]
        deep = Loader(path, global_batch_size=512, epochs=None, prefetch=0)
        rows = deep.epoch_rows
        seek_s, _ = timed(lambda deep=deep, rows=rows: deep.stream.rows(3, rows * 7 // 10, 512))
        out.append(
            {
                "shards": shards,
                "rows": rows,
                "what": "Loader() + first batch (real shard files)"
                if with_files
                else "Loader() + first batch plan",
                "startup_s": statistics.median(times),
                "startup_best_s": min(times),
                "deep_resume_plan_s": seek_s,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--skip-mds", action="store_true")
    parser.add_argument("--skip-startup", action="store_true")
    parser.add_argument("--streaming-path", default=os.environ.get("FM_BENCH_STREAMING_PATH"))
    parser.add_argument("--trainer-only", action="store_true", help="only the plain/enriched/workers runs")
    parser.add_argument("--step-ms", type=float, default=20.0, help="simulated training step per batch")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers of the 'workers' run")
    parser.add_argument("--trainer-repeats", type=int, default=5, help="runs per trainer config (median)")
    args = parser.parse_args()
    out: dict[str, Any] = {
        "rows": args.rows,
        "seq_len": args.seq_len,
        "shards": args.shards,
        "batch": args.batch,
        "repeats": args.repeats,
        "cpus": os.cpu_count(),
        "load_avg_start": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory() as folder:
        path, rows = build(folder, args.rows, args.seq_len, args.shards)
        if args.trainer_only:
            out["trainer_runs"] = trainer_runs(folder, path, args)
            out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            out["load_avg_end"] = os.getloadavg()[0]
            print(json.dumps(out, indent=1))
            return
        token_bytes = sum(len(r) for r in rows) * 2
        out["token_bytes"] = token_bytes
        tars = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".tar"))
        src = np.concatenate(rows)
        dst = np.empty_like(src)

        readers: dict[str, Callable[[], Any]] = {
            "fm_loader": lambda: fm_pass(path, args.batch),
            "webdataset": lambda: wds_pass(tars),
            "memcpy": lambda: memcpy_pass(src, dst),
            "fm_loader_int64_input_ids": lambda: fm_pass(path, args.batch, input_ids_dtype=torch.int64),
            "fm_loader_prefetch_thread": lambda: fm_pass(path, args.batch, prefetch=2),
        }
        streaming = None
        if not args.skip_mds:
            try:
                streaming = import_streaming(args.streaming_path)
            except ImportError as exc:
                out["mosaic_streaming"] = {"skipped": f"{exc} (see --streaming-path)"}
        if streaming is not None:
            mds_dir = os.path.join(folder, "mds")
            with streaming.MDSWriter(
                out=mds_dir, columns={"tokens": "ndarray:uint16"}, size_limit=1 << 26
            ) as w:
                for r in rows:
                    w.write({"tokens": r})
            readers["mosaic_streaming"] = lambda: mds_pass(streaming, mds_dir)

        fm_tokens, fm_out = readers["fm_loader"]()
        _, fm64_out = readers["fm_loader_int64_input_ids"]()
        assert fm_tokens == wds_pass(tars) == src.size
        if "mosaic_streaming" in readers:
            assert readers["mosaic_streaming"]() == src.size

        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_first, _ = timed(lambda: next(iter(Loader(path, global_batch_size=args.batch, prefetch=0))))
        times, cpu = rounds(readers, args.repeats)
        deep = Loader(path, global_batch_size=args.batch, epochs=None, prefetch=0)
        deep.load_state_dict({**deep.state_dict(), "epoch": 5, "rows_consumed": args.rows * 3 // 4})
        resume_s, _ = timed(lambda: next(iter(deep)))

        def stats(name: str, **extra: float) -> dict[str, float]:
            med = statistics.median(times[name])
            return {
                "s": med,
                "best_s": min(times[name]),
                "cpu_s": statistics.median(cpu[name]),
                "bytes_per_s": token_bytes / med,
                **extra,
            }

        fm_s = statistics.median(times["fm_loader"])
        out["fm_loader"] = stats(
            "fm_loader",
            tokens_per_s=fm_tokens / fm_s,
            output_bytes_per_s=fm_out / fm_s,
            output_bytes_per_token=fm_out / fm_tokens,
        )
        fm64_s = statistics.median(times["fm_loader_int64_input_ids"])
        out["fm_loader_int64_input_ids"] = stats(
            "fm_loader_int64_input_ids",
            output_bytes_per_s=fm64_out / fm64_s,
            output_bytes_per_token=fm64_out / fm_tokens,
        )
        out["fm_loader_prefetch_thread"] = stats("fm_loader_prefetch_thread")
        out["webdataset"] = stats("webdataset")
        out["memcpy"] = stats("memcpy")
        if "mosaic_streaming" in times:
            out["mosaic_streaming"] = stats("mosaic_streaming")
        out["ratio_vs_webdataset"] = ratio(times, "webdataset", "fm_loader")
        if "mosaic_streaming" in times:
            out["ratio_vs_mosaic_streaming"] = ratio(times, "mosaic_streaming", "fm_loader")
        out["fraction_of_memcpy"] = ratio(times, "memcpy", "fm_loader")
        out["output_fraction_of_memcpy"] = out["fraction_of_memcpy"] * fm_out / token_bytes
        out["cpu_time_ratios"] = {
            "vs_webdataset": ratio(cpu, "webdataset", "fm_loader"),
            "fraction_of_memcpy": ratio(cpu, "memcpy", "fm_loader"),
            **(
                {"vs_mosaic_streaming": ratio(cpu, "mosaic_streaming", "fm_loader")}
                if "mosaic_streaming" in cpu
                else {}
            ),
        }
        out["first_batch_s"] = t_first
        out["deep_resume_first_batch_s"] = resume_s
        out["rss_growth_mb_during_fm_loader"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        ) / 1024

        out["trainer_runs"] = trainer_runs(folder, path, args)
        if not args.skip_startup:
            manifest = DatasetManifest.load(path)
            out["startup"] = startup(folder, manifest.shards[0], args.seq_len, repeats=3)
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_avg_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
