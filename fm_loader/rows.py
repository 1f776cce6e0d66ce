"""Plain sequential reading of decoded rows, for demos, audits and peer checks (no shuffling, no batching)."""

from __future__ import annotations

from collections.abc import Iterator

from fm_loader.format import PackedRow, decode_index, decode_row
from fm_loader.manifest import DatasetManifest
from fm_loader.storage import ShardCache, read_bytes


def read_rows(
    manifest_path: str | DatasetManifest, limit: int | None = None, cache: ShardCache | None = None
) -> Iterator[tuple[PackedRow, str, int]]:
    """Read rows in manifest order, without shuffling or batching (for demos, audits and peer checks).

    Args:
        manifest_path: A manifest path or URI, or a loaded :class:`~fm_loader.manifest.DatasetManifest`.
        limit: Stop after this many rows (``None``: all rows).
        cache: Cache for remote shards; a default :class:`~fm_loader.storage.ShardCache` if not given.

    Yields:
        ``(row, shard_name, row_index)``: the decoded :class:`~fm_loader.format.PackedRow`, the shard's name
        (its tar file name without ``.tar``) and the row's index inside the shard.

    Raises:
        ValueError: A row fails its checksum (or the manifest is invalid).
        fm_loader.format.CorruptIndexError: A row index is damaged.
    """
    manifest = (
        manifest_path if isinstance(manifest_path, DatasetManifest) else DatasetManifest.load(manifest_path)
    )
    cache = cache or ShardCache()
    produced = 0
    for entry in manifest.shards:
        index = decode_index(read_bytes(cache.get(manifest.index_uri(entry))), manifest.index_uri(entry))
        tar = read_bytes(cache.get(manifest.shard_uri(entry)))
        name = entry.path.rsplit("/", 1)[-1].removesuffix(".tar")
        for row in range(index.rows):
            if limit is not None and produced >= limit:
                return
            yield decode_row(tar, index, row), name, row
            produced += 1
