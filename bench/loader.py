"""Benchmark fm_loader against webdataset, a plain memory copy and MosaicML StreamingDataset (same tokens).

Prints one JSON object. Usage: ``python bench/loader.py [--rows 16384] [--seq-len 2048] [--shards 64]``.
Throughput is measured from page cache (every reader gets one warm-up pass first); each timing is the best of
``--repeats`` runs, so that other processes on the machine distort it less.

Two denominators are reported for fm_loader:

* ``bytes_per_s``: shard token bytes read per second (uint16 ids: 2 bytes a token), the unit shared with
  webdataset and memcpy (``fraction_of_memcpy`` compares these);
* ``output_bytes_per_s``: bytes of the batch tensors produced per second (input_ids, labels int64,
  loss_mask, position/segment ids, ...: about 21 bytes a token with int32 input_ids, 25 with int64), and
  ``output_fraction_of_memcpy`` compares that with memcpy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from fm_loader import DatasetManifest, Loader, PackedRow, ShardEntry, encode_shard
from fm_loader.manifest import DatasetManifest as _Manifest
from fm_loader.mixture import Mixture
from fm_loader.sources import ManifestSource
from fm_loader.stream import GlobalStream

VOCAB = 50257


def build(folder: str, rows: int, seq_len: int, shards: int) -> tuple[str, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    per_shard = rows // shards
    entries, all_rows = [], []
    for s in range(shards):
        packed = []
        for _ in range(per_shard):
            tokens = rng.integers(0, VOCAB, seq_len, dtype=np.uint16)
            cuts = np.sort(rng.choice(np.arange(1, seq_len), 3, replace=False))
            packed.append(PackedRow(tokens, np.diff([0, *cuts, seq_len]).tolist(), ["x:0"] * 4))
            all_rows.append(tokens)
        enc = encode_shard(packed, f"shard-{s:06d}", seq_len, VOCAB)
        for name, data in enc.files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        entries.append(ShardEntry.from_info(enc.info))
    manifest = DatasetManifest("bench", "v1", seq_len, VOCAB, "bench-tok", "bench", entries)
    path = os.path.join(folder, "manifest.json")
    manifest.save(path)
    return path, all_rows


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fm_pass(path: str, gbs: int, **options) -> tuple[int, int]:
    """(tokens, bytes of batch tensors) of one epoch."""
    tokens = out_bytes = 0
    for batch in Loader(path, global_batch_size=gbs, **{"prefetch": 0, **options}):
        tokens += int(batch["valid_token_count"].sum())
        out_bytes += sum(t.numel() * t.element_size() for t in batch.values())
    return tokens, out_bytes


def best_of(repeats: int, fn) -> tuple[float, object]:
    """Shortest wall time of ``repeats`` calls, and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def wds_pass(tars: list[str]) -> int:
    import webdataset as wds

    tokens = 0
    for sample in wds.WebDataset(tars, shardshuffle=False):
        tokens += len(np.frombuffer(sample["tokens"], dtype="<u2"))
    return tokens


def memcpy_pass(src: np.ndarray, dst: np.ndarray) -> int:
    np.copyto(dst, src)
    return src.size


def _import_streaming():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
    from make_mds_fixture import _import_streaming as imp

    return imp()


def mds_pass(folder: str) -> int:
    streaming = _import_streaming()
    ds = streaming.StreamingDataset(local=folder, shuffle=False, batch_size=1)
    tokens = 0
    for i in range(len(ds)):
        tokens += len(ds[i]["tokens"])
    return tokens


def synthetic_manifest(shards: int, rows_per_shard: int = 4096) -> str:
    entries = [
        ShardEntry(f"s/{i:07d}.tar", f"{i:064x}", rows_per_shard, rows_per_shard * 2048)
        for i in range(shards)
    ]
    m = _Manifest("synthetic", "v1", 2048, VOCAB, "tok", "c", entries)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    m.save(path)
    return path


def startup_and_seek(shards: int) -> dict[str, float]:
    """Manifest load + stream plan + row refs of the first batch, and of a batch deep in epoch 3 (no shard I/O)."""
    path = synthetic_manifest(shards)
    t0 = time.perf_counter()
    manifest = _Manifest.load(path)
    src = ManifestSource(manifest)
    stream = GlobalStream(Mixture([src], [src.rows]), seed=0)
    stream.rows(0, 0, 512)
    start_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    stream2 = GlobalStream(Mixture([src], [src.rows]), seed=0)
    stream2.rows(3, src.rows * 7 // 10, 512)
    seek_s = time.perf_counter() - t0
    os.unlink(path)
    return {"shards": shards, "rows": src.rows, "startup_s": start_s, "deep_resume_plan_s": seek_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-mds", action="store_true")
    args = parser.parse_args()
    out: dict[str, object] = {"rows": args.rows, "seq_len": args.seq_len, "shards": args.shards}
    with tempfile.TemporaryDirectory() as folder:
        path, rows = build(folder, args.rows, args.seq_len, args.shards)
        token_bytes = sum(len(r) for r in rows) * 2
        out["token_bytes"] = token_bytes
        tars = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".tar"))

        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t_first, _ = timed(lambda: next(iter(Loader(path, global_batch_size=args.batch, prefetch=0))))
        fm_pass(path, args.batch)  # warm page cache
        fm_s, (fm_tokens, fm_out) = best_of(args.repeats, lambda: fm_pass(path, args.batch))
        rss_fm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        fm64_s, (_, fm64_out) = best_of(
            args.repeats, lambda: fm_pass(path, args.batch, input_ids_dtype=torch.int64)
        )
        fm_pf_s, _ = best_of(args.repeats, lambda: fm_pass(path, args.batch, prefetch=2))
        wds_pass(tars)
        wds_s, wds_tokens = best_of(args.repeats, lambda: wds_pass(tars))
        src = np.concatenate(rows)
        dst = np.empty_like(src)
        memcpy_pass(src, dst)
        mem_s, _ = best_of(max(args.repeats, 5), lambda: memcpy_pass(src, dst))
        assert fm_tokens == wds_tokens == src.size

        deep = Loader(path, global_batch_size=args.batch, epochs=None, prefetch=0)
        deep.load_state_dict({**deep.state_dict(), "epoch": 5, "rows_consumed": args.rows * 3 // 4})
        resume_s, _ = timed(lambda: next(iter(deep)))

        memcpy_bps = token_bytes / mem_s
        out["fm_loader"] = {
            "s": fm_s,
            "bytes_per_s": token_bytes / fm_s,
            "tokens_per_s": fm_tokens / fm_s,
            "output_bytes_per_s": fm_out / fm_s,
            "output_bytes_per_token": fm_out / fm_tokens,
        }
        out["fm_loader_int64_input_ids"] = {
            "s": fm64_s,
            "bytes_per_s": token_bytes / fm64_s,
            "output_bytes_per_s": fm64_out / fm64_s,
            "output_bytes_per_token": fm64_out / fm_tokens,
        }
        out["fm_loader_prefetch_thread"] = {"s": fm_pf_s, "bytes_per_s": token_bytes / fm_pf_s}
        out["webdataset"] = {
            "s": wds_s,
            "bytes_per_s": token_bytes / wds_s,
            "tokens_per_s": wds_tokens / wds_s,
        }
        out["memcpy"] = {"s": mem_s, "bytes_per_s": memcpy_bps}
        out["ratio_vs_webdataset"] = wds_s / fm_s
        out["fraction_of_memcpy"] = mem_s / fm_s
        out["output_fraction_of_memcpy"] = (fm_out / fm_s) / memcpy_bps
        out["first_batch_s"] = t_first
        out["deep_resume_first_batch_s"] = resume_s
        out["peak_rss_mb_after_fm_loader"] = rss_fm / 1024
        out["rss_growth_mb_during_fm_loader"] = (rss_fm - rss0) / 1024

        if not args.skip_mds:
            try:
                streaming = _import_streaming()
                mds_dir = os.path.join(folder, "mds")
                with streaming.MDSWriter(
                    out=mds_dir, columns={"tokens": "ndarray:uint16"}, size_limit=1 << 26
                ) as w:
                    for r in rows:
                        w.write({"tokens": r})
                mds_pass(mds_dir)
                mds_s, _mds_tokens = best_of(args.repeats, lambda: mds_pass(mds_dir))
                out["mosaic_streaming"] = {"s": mds_s, "bytes_per_s": token_bytes / mds_s}
                out["ratio_vs_mosaic_streaming"] = mds_s / fm_s
            except ImportError as exc:
                out["mosaic_streaming"] = {"skipped": str(exc)}
    out["startup"] = [startup_and_seek(n) for n in (10_000, 100_000)]
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
