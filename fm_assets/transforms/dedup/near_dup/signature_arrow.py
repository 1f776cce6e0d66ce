"""MinHash signatures and LSH band hashes of documents, per Arrow batch, with no Spark or JVM.

The one body every engine maps over documents: Spark through ``mapInArrow`` (:mod:`.signatures_spark`), the
in-process path and the signature units of a pool or Spark executor (:mod:`.signature_units`). One row per
document: its shingle count, its signature (``num_perm`` little-endian uint32) and its band hashes;
documents without any token get ``n_shingles == 0``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fm_assets.transforms.dedup.minhash import band_hashes, signatures_from_shingles
from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

_MAX_SLICE_BYTES = 64 << 20  # text bytes hashed at once inside one Arrow batch
# one row per document, as every engine writes it; the signature units store it without the text
SIG_ARROW_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("quality_score", pa.float32()),
        ("n_shingles", pa.int64()),
        ("signature", pa.binary()),
        ("bands", pa.list_(pa.int64())),
        ("text", pa.string()),
    ]
)
SIG_COLUMNS = tuple(SIG_ARROW_SCHEMA.names)


def _slices(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """Cut a batch so one slice holds at most _MAX_SLICE_BYTES of text (an enormous doc stays alone)."""
    sizes = np.asarray(pc.binary_length(batch.column("text")).fill_null(0), dtype=np.int64)
    start, acc = 0, 0
    for i, size in enumerate(sizes):
        if acc and acc + size > _MAX_SLICE_BYTES:
            yield batch.slice(start, i - start)
            start, acc = i, 0
        acc += int(size)
    if start < batch.num_rows:
        yield batch.slice(start, batch.num_rows - start)


def signature_batches(
    config: NearDedupConfig, bands: int, rows: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    hasher = config.hasher()

    def compute(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for part in _slices(batch):
                shingles = hasher.shingles(part.column("text"))
                sigs = signatures_from_shingles(shingles, config.num_perm, config.seed)
                n = part.num_rows
                sig_offsets = pa.array(np.arange(n + 1, dtype=np.int32) * (config.num_perm * 4))
                sig_array = pa.BinaryArray.from_buffers(
                    pa.binary(),
                    n,
                    [None, sig_offsets.buffers()[1], pa.py_buffer(sigs.astype("<u4").tobytes())],
                )
                band_offsets = pa.array(np.arange(n + 1, dtype=np.int32) * bands)
                band_array = pa.ListArray.from_arrays(
                    band_offsets, pa.array(band_hashes(sigs, bands, rows).ravel())
                )
                yield pa.RecordBatch.from_arrays(
                    [
                        part.column("doc_id"),
                        part.column("quality_score").cast(pa.float32()),
                        pa.array(shingles.counts(), type=pa.int64()),
                        sig_array,
                        band_array,
                        part.column("text") if config.verify_exact else pa.nulls(n, pa.string()),
                    ],
                    names=list(SIG_COLUMNS),
                )

    return compute
