"""One media manifest as a source of samples: its shard sizes up front, verified indexes and open shards on demand.

A shard's sample index is read (through :class:`fm_loader.storage.ShardCache` for remote URIs), checked against
the manifest's sha256 and sample count, and kept in a small LRU; tars are memory-mapped when a batch needs one
of their samples and kept open in another LRU. Each sample is verified against its 32-bit checksum before its
bytes are used; a mismatch is re-read from the file once (a bad page or a transient read), then reported.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from fm_loader.format import sample_checksum32
from fm_loader.media.errors import CorruptSampleError
from fm_loader.media.format import (
    MEDIA_EXTS,
    VIDEO_EXTS,
    MediaIndex,
    decode_media_index,
    modality_of,
    trailing_clip,
)
from fm_loader.media.manifest import MediaManifest
from fm_loader.sources import CorruptShardError
from fm_loader.storage import ShardCache, is_remote, read_bytes

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SampleBytes:
    """The verified bytes of one sample's members."""

    media: memoryview
    media_ext: str
    text: str
    meta: memoryview
    tail: memoryview  # from the .json payload to the sample's end (``trailing_clip``)

    def clip(self) -> memoryview | None:
        """A video-text sample's re-encoded clip, when the shard carries one (``ValueError``: malformed)."""
        return trailing_clip(self.tail, len(self.meta)) if self.media_ext in VIDEO_EXTS else None


class MediaShardReader:
    """A memory-mapped media shard: verified samples by index."""

    def __init__(self, path: str, index: MediaIndex, label: str, cache: ShardCache | None) -> None:
        self.path, self.index, self.label = path, index, label
        self._cache = cache
        self._file = open(path, "rb")  # noqa: SIM115 - kept open for the memory map's lifetime
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), size, access=mmap.ACCESS_READ) if size else None
        self._view = memoryview(self._map) if self._map is not None else memoryview(b"")

    def sample(self, row: int, skip_corrupt: bool = False) -> SampleBytes | None:
        """Sample ``row``, checked against its checksum (re-read once on a mismatch).

        Returns:
            The sample's members, or ``None`` when it is corrupt and ``skip_corrupt`` is set.

        Raises:
            CorruptSampleError: The checksum fails twice and ``skip_corrupt`` is not set.
        """
        rec = self.index.records[row]
        start, size = int(rec["sample_offset"]), int(rec["sample_size"])
        data: memoryview = self._view[start : start + size]
        want = int(rec["checksum"])
        if len(data) != size or sample_checksum32(data) != want:
            data = memoryview(os.pread(self._file.fileno(), size, start))
            if len(data) != size or sample_checksum32(data) != want:
                key = self.index.key(row)
                if not skip_corrupt:
                    raise CorruptSampleError(
                        self.label,
                        row,
                        key,
                        "checksum mismatch after a re-read; `fm verify` lists the damage",
                    )
                logger.warning("skipping corrupt sample %d (%s) of %s", row, key, self.label)
                return None

        def member(offset: int, length: int) -> memoryview:
            return data[offset - start : offset - start + length]

        return SampleBytes(
            media=member(int(rec["media_offset"]), int(rec["media_size"])),
            media_ext=MEDIA_EXTS[int(rec["media_kind"])],
            text=bytes(member(int(rec["text_offset"]), int(rec["text_size"]))).decode("utf-8"),
            meta=member(int(rec["meta_offset"]), int(rec["meta_size"])),
            tail=data[int(rec["meta_offset"]) - start :],
        )

    def close(self) -> None:
        try:
            self._view.release()
            if self._map is not None:
                self._map.close()
        except BufferError:  # a sample's view is still referenced: the map closes with its last reference
            pass
        self._file.close()
        if self._cache is not None:
            self._cache.unpin(self.path)


class MediaSource:
    """The shards of one :class:`MediaManifest`.

    Attributes:
        manifest: The manifest.
        name: Its name (for messages).
        shard_rows: Samples per shard, in manifest order (all the global stream needs).
        modality: ``"image-text"`` or ``"audio-text"``.
    """

    def __init__(
        self, manifest: MediaManifest, cache: ShardCache, max_indexes: int = 256, max_open: int = 8
    ) -> None:
        self.manifest = manifest
        self.name = manifest.name
        self.modality = manifest.modality
        self.shard_rows = np.array([s.samples for s in manifest.shards], dtype=np.int64)
        self.cache = cache
        self._indexes: OrderedDict[int, MediaIndex] = OrderedDict()
        self._open: OrderedDict[int, MediaShardReader] = OrderedDict()
        self._max_indexes, self._max_open = max_indexes, max_open
        h = hashlib.sha256(f"{manifest.schema_fingerprint}|{manifest.modality}".encode())
        for s in manifest.shards:
            h.update(f"|{s.sha256}:{s.index_sha256}:{s.samples}".encode())
        self.fingerprint = h.hexdigest()[:16]
        """Changes when any shard's bytes or sample count change."""

    def shard_label(self, shard: int) -> str:
        return self.manifest.shard_uri(self.manifest.shards[shard])

    def index(self, shard: int) -> MediaIndex:
        """The verified sample index of shard ``shard`` (cached).

        Raises:
            CorruptShardError: The index is missing, differs from the manifest's sha256 or sample count, or
                holds another modality.
        """
        found = self._indexes.get(shard)
        if found is not None:
            self._indexes.move_to_end(shard)
            return found
        entry = self.manifest.shards[shard]
        uri = self.manifest.index_uri(entry)
        label = self.shard_label(shard)
        try:
            data = read_bytes(self.cache.get(uri))
        except OSError as exc:
            raise CorruptShardError(
                label, self.manifest.location, f"sample index {uri} unreadable ({exc})"
            ) from exc
        if hashlib.sha256(data).hexdigest() != entry.index_sha256:
            raise CorruptShardError(
                label, self.manifest.location, f"sample index {uri} differs from the manifest"
            )
        try:
            index = decode_media_index(data, uri)
        except ValueError as exc:
            raise CorruptShardError(label, self.manifest.location, str(exc)) from exc
        if index.samples != entry.samples:
            raise CorruptShardError(
                label,
                self.manifest.location,
                f"index has {index.samples} samples, manifest says {entry.samples}",
            )
        kinds = {
            modality_of(MEDIA_EXTS[k]) + "-text" for k in np.unique(index.records["media_kind"]).tolist()
        }
        if kinds - {self.modality}:
            raise CorruptShardError(
                label, self.manifest.location, f"holds {sorted(kinds)} samples in a {self.modality} manifest"
            )
        self._indexes[shard] = index
        if len(self._indexes) > self._max_indexes:
            self._indexes.popitem(last=False)
        return index

    def reader(self, shard: int) -> MediaShardReader:
        """The open shard ``shard`` (cached; the least recently used beyond ``max_open`` are closed).

        Raises:
            CorruptShardError: The tar is missing or unreadable.
        """
        found = self._open.get(shard)
        if found is not None:
            self._open.move_to_end(shard)
            return found
        index = self.index(shard)
        uri = self.shard_label(shard)
        try:
            local = self.cache.get(uri, pin=is_remote(uri))
            reader = MediaShardReader(local, index, uri, self.cache if is_remote(uri) else None)
        except OSError as exc:
            detail = f"missing or unreadable ({type(exc).__name__}: {exc}); `fm verify` lists the damage"
            raise CorruptShardError(uri, self.manifest.location, detail) from exc
        self._open[shard] = reader
        if len(self._open) > self._max_open:
            self._open.popitem(last=False)[1].close()
        return reader

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1].close()
