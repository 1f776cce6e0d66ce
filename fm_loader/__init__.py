"""fm_loader: the trainer-side half of the FM data platform - shard format (write + read) and loader.

No Dagster, Spark or pipeline imports: a training job needs only the base install
(``pip install fm-data-platform``, no extras: numpy, torch, xxhash, pyyaml, fsspec, zstandard). Extras add
``s3://`` shards (``[s3]``), MDS text sources (``[mds-text]``) and :mod:`fm_loader.energon` (``[energon]``);
the pipeline is ``[pipeline]``.

Writing shards (what the pipeline's shard stage calls)::

    from fm_loader.format import PackedRow, encode_shard
    from fm_loader.kinds import KINDS, read_manifest
    from fm_loader.manifest import DatasetManifest, ShardEntry
    from fm_loader.manifest_base import Manifest
    from fm_loader.metrics import MetricsLogger, measure_compute_baseline
    from fm_loader.modality_mixture import ModalityMixture
    enc = encode_shard(rows, shard_name="shard-000000", seq_len=2048, vocab_size=50257)
    for name, data in enc.files.items(): ...            # write atomically next to each other
    manifest = DatasetManifest(name="web", version="v1", seq_len=2048, vocab_size=50257,
                               tokenizer_hash="...", code_version="...",
                               shards=[ShardEntry.from_info(enc.info)])
    manifest.save("datasets/web/v1/manifest.json")

Training::

    loader = fm_loader.Loader("datasets/web/v1/manifest.json", global_batch_size=512, rank=r, world_size=W,
                              seed=0, expected_tokenizer_hash="...")
    for batch in loader: ...                             # fixed-shape dict of tensors (see fm_loader.batching):
                                                         # input_ids int32 (input_ids_dtype=torch.int64 for
                                                         # int64), labels int64, loss_mask bool, ...
    state = loader.state_dict()                          # {format, fingerprint, seed, epoch, rows_consumed}
    loader2 = fm_loader.Loader(..., rank=r2, world_size=W2); loader2.load_state_dict(state)

Remote shards (``s3://``, ``gs://``, ... through fsspec) are cached locally; pass fsspec options with
``storage_options``, e.g. ``Loader("s3://bucket/web/v1/manifest.json", ..., storage_options={"client_kwargs":
{"endpoint_url": "http://127.0.0.1:9000"}})`` for an S3-compatible server.

One ``Loader`` reads every sample kind: packed tokens, image-text and audio-text manifests (``kinds`` is the
registry of kinds: manifest type, shard codec and batch builder; ``builders`` holds one builder per kind).

Modules: ``format`` (tar + row index), ``tarwriter``, ``row_index``, ``manifest``, ``kinds``, ``options``, ``state``, ``storage`` (URIs, remote cache), ``prewarm`` (hot
tier), ``order`` (shuffle and interleave math), ``stream`` (global stream), ``mixture`` (YAML mixtures),
``sources`` (shard readers), ``mds`` (MosaicML MDS sources), ``access`` (namespaces, revocations),
``holdout`` + ``validation`` (per-dataset validation slices), ``gather`` (rows of a batch out of open shards),
``batching`` (fixed-shape batch), ``columns`` (per-token extra columns), ``metrics``, ``prefetch``, ``modality_mixture``, ``loader`` (the core), ``builders``, ``rows``
(``read_rows``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names resolve on first use: the pipeline imports fm_loader.format / .manifest to write shards and must not
# pay for torch (about a second) in every process that only writes them.
_EXPORTS = {
    "IGNORE_INDEX": "fm_loader.batching",
    "SOURCE_SHIFT": "fm_loader.batching",
    "EncodedShard": "fm_loader.format",
    "PackedRow": "fm_loader.format",
    "ShardInfo": "fm_loader.format",
    "encode_shard": "fm_loader.format",
    "NamespaceError": "fm_loader.access",
    "RevokedDatasetError": "fm_loader.access",
    "Loader": "fm_loader.loader",
    "PinningError": "fm_loader.loader",
    "MetricsLogger": "fm_loader.metrics",
    "measure_compute_baseline": "fm_loader.metrics",
    "ModalityMixture": "fm_loader.modality_mixture",
    "DatasetManifest": "fm_loader.manifest",
    "ShardEntry": "fm_loader.manifest",
    "Manifest": "fm_loader.manifest_base",
    "read_rows": "fm_loader.rows",
    "read_manifest": "fm_loader.kinds",
    "KINDS": "fm_loader.kinds",
    "ReadOptions": "fm_loader.options",
    "AccessOptions": "fm_loader.options",
    "TokenOptions": "fm_loader.options",
    "MediaOptions": "fm_loader.options",
    "DeliveryOptions": "fm_loader.options",
    "CorruptRowError": "fm_loader.sources",
    "CorruptShardError": "fm_loader.sources",
    "Problem": "fm_loader.verify",
    "VerifyReport": "fm_loader.verify",
    "verify_dataset": "fm_loader.verify",
    "verify_shard": "fm_loader.verify",
    "validation_loaders": "fm_loader.validation",
}

if TYPE_CHECKING:
    from fm_loader.access import NamespaceError, RevokedDatasetError
    from fm_loader.batching import IGNORE_INDEX, SOURCE_SHIFT
    from fm_loader.format import EncodedShard, PackedRow, ShardInfo, encode_shard
    from fm_loader.kinds import KINDS, read_manifest
    from fm_loader.loader import Loader, PinningError
    from fm_loader.manifest import DatasetManifest, ShardEntry
    from fm_loader.manifest_base import Manifest
    from fm_loader.metrics import MetricsLogger, measure_compute_baseline
    from fm_loader.modality_mixture import ModalityMixture
    from fm_loader.options import AccessOptions, DeliveryOptions, MediaOptions, ReadOptions, TokenOptions
    from fm_loader.rows import read_rows
    from fm_loader.sources import CorruptRowError, CorruptShardError
    from fm_loader.validation import validation_loaders
    from fm_loader.verify import Problem, VerifyReport, verify_dataset, verify_shard


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fm_loader' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "IGNORE_INDEX",
    "KINDS",
    "SOURCE_SHIFT",
    "AccessOptions",
    "CorruptRowError",
    "CorruptShardError",
    "DatasetManifest",
    "DeliveryOptions",
    "EncodedShard",
    "Loader",
    "Manifest",
    "MediaOptions",
    "MetricsLogger",
    "ModalityMixture",
    "NamespaceError",
    "PackedRow",
    "PinningError",
    "Problem",
    "ReadOptions",
    "RevokedDatasetError",
    "ShardEntry",
    "ShardInfo",
    "TokenOptions",
    "VerifyReport",
    "encode_shard",
    "measure_compute_baseline",
    "read_manifest",
    "read_rows",
    "validation_loaders",
    "verify_dataset",
    "verify_shard",
]
