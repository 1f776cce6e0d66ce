"""Loader throughput and stall counters."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fm_loader.storage import CacheStats


@dataclass
class LoaderMetrics:
    rows: int = 0
    tokens: int = 0
    bytes: int = 0
    batches: int = 0
    wait_s: float = 0.0  # time the consumer spent blocked waiting for the next batch: the input stall
    corrupt_rows_skipped: int = 0  # rows made padding: corrupt, or in a missing shard (skip_corrupt)
    lost_rows: int = 0  # of those, rows whose shard or row index could not be opened
    started: float = field(default_factory=time.perf_counter)

    def snapshot(self, cache_stats: CacheStats | None = None) -> dict[str, float]:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        out = {
            "rows": self.rows,
            "tokens": self.tokens,
            "bytes": self.bytes,
            "batches": self.batches,
            "elapsed_s": elapsed,
            "rows_per_s": self.rows / elapsed,
            "tokens_per_s": self.tokens / elapsed,
            "bytes_per_s": self.bytes / elapsed,
            "input_stall_s": self.wait_s,
            "input_stall_fraction": self.wait_s / elapsed,
            "corrupt_rows_skipped": self.corrupt_rows_skipped,
            "lost_rows": self.lost_rows,
        }
        if cache_stats is not None:
            out.update(
                cache_hits=cache_stats.hits,
                cache_misses=cache_stats.misses,
                cache_bytes_downloaded=cache_stats.bytes_downloaded,
                cache_evictions=cache_stats.evictions,
            )
        return out
