"""Plain sequential reading of decoded rows, for demos, audits and peer checks (no shuffling, no batching)."""

from __future__ import annotations

from collections.abc import Iterator

from fm_loader.format import PackedRow, decode_index, decode_row
from fm_loader.manifest import DatasetManifest
from fm_loader.storage import ShardCache, read_bytes


def read_rows(
    manifest_path: str | DatasetManifest, limit: int | None = None, cache: ShardCache | None = None
) -> Iterator[tuple[PackedRow, str, int]]:
    """Yield ``(row, shard_name, row_index)`` in manifest order, verifying each row's checksum."""
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
