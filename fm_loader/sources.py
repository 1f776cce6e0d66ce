"""Row sources the loader can mix: our WebDataset shards (via a manifest) and, in ``fm_loader.mds``,
MosaicML MDS datasets. A source exposes its shards' row counts up front (no shard is opened to plan the
order) and opens a shard only when a batch needs its rows."""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import numpy as np
import xxhash

from fm_loader.format import (
    RECORD_WORDS,
    WORD_DOC_START,
    WORD_SIZES,
    WORD_TOKENS_CHECKSUM,
    WORD_TOKENS_OFFSET,
    RowIndex,
    decode_index,
    row_checksum,
    token_dtype_for,
)
from fm_loader.manifest import DatasetManifest, ShardEntry
from fm_loader.storage import ShardCache, is_remote, read_bytes

logger = logging.getLogger(__name__)


class CorruptRowError(RuntimeError):
    """A row failed its checksum twice (read, then re-read), or a shard failed a whole-file check.

    Attributes:
        shard: Path or URI of the shard.
        row: Row index inside the shard; -1 when the whole shard or its index is at fault.
    """

    def __init__(self, shard: str, row: int, detail: str = "checksum mismatch") -> None:
        """Build the error.

        Args:
            shard: Path or URI of the shard.
            row: Row index inside the shard, or -1 for the whole shard.
            detail: What was wrong.
        """
        super().__init__(f"corrupt row {row} in shard {shard}: {detail}")
        self.shard = shard
        self.row = row


class CorruptShardError(CorruptRowError):
    """A whole shard (its tar or its row index) is missing, unreadable or does not match the manifest.

    Attributes:
        shard: Path or URI of the shard's tar.
        manifest: The manifest that lists it.
    """

    def __init__(self, shard: str, manifest: str, detail: str) -> None:
        RuntimeError.__init__(self, f"shard {shard} (listed in {manifest or 'the manifest'}): {detail}")
        self.shard = shard
        self.row = -1
        self.manifest = manifest


@dataclass
class ReadResult:
    lengths: list[int]  # tokens per row read (0 for a skipped corrupt row)
    doclens: list[np.ndarray]  # document lengths per row (empty for a skipped corrupt row)
    bytes_read: int
    corrupt_rows: list[int]  # rows skipped because they were corrupt (only when skip_corrupt)


class ShardRows(ABC):
    """An open shard: copies rows into a caller's token buffer."""

    @abstractmethod
    def read(
        self, rows: np.ndarray, out: np.ndarray, slots: np.ndarray, skip_corrupt: bool = False
    ) -> ReadResult:
        """Copy row ``rows[j]`` into ``out[slots[j], :n]``; lengths/doclens come back in ``rows`` order."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class Source(ABC):
    """A named dataset with known per-shard row counts.

    ``namespace`` and ``revoked`` are what :mod:`fm_loader.access` enforces; ``origin`` names where the source
    came from in error messages.
    """

    name: str
    seq_len: int
    vocab_size: int
    tokenizer_hash: str
    shard_rows: np.ndarray
    max_docs_per_row: int
    namespace: str = "cloud"
    revoked: dict[str, Any] | None = None
    origin: str = ""
    tar_token_dtype: np.dtype | None = (
        None  # set when rows come from our tar shards (the batch gather reads them)
    )

    @property
    @abstractmethod
    def fingerprint(self) -> str:
        """Changes whenever the rows or their order-relevant layout change."""

    @abstractmethod
    def open_shard(self, shard: int) -> ShardRows: ...

    @abstractmethod
    def shard_label(self, shard: int) -> str: ...

    @property
    def rows(self) -> int:
        return int(self.shard_rows.sum())

    @property
    def tokens(self) -> int | None:
        """Tokens over all rows when known without reading shards (``token_weight`` needs it), else None."""
        return None

    @property
    def shard_tokens(self) -> list[int] | None:
        """Tokens per shard when known without reading shards, else None."""
        return None

    def shard_files(self, shard: int) -> list[str]:
        """URIs of the files opening ``shard`` reads (what a prewarm fetches); empty when unknown."""
        return []

    def shard_key(self, shard: int) -> str:
        """A stable id of the shard's content (what ranks shards for validation slices)."""
        return f"{self.fingerprint}|{shard}"


POPULATE_MAX_BYTES = 256 << 20
"""Shards up to this size are mapped pre-faulted (Linux ``MAP_POPULATE``), bigger ones page by page."""


def _map_read_only(fd: int, size: int) -> mmap.mmap:
    """A read-only shared map of the whole file.

    On Linux a shard of at most :data:`POPULATE_MAX_BYTES` is pre-faulted (``MAP_POPULATE``): every row of an
    open shard is read while its window is (the shuffle visits whole shards), and one populate costs less than
    a page fault every few rows (and reads a cold file sequentially instead of row by row); a bigger shard is
    faulted in as its rows are read, so that opening it does not wait for all of it.
    """
    populate = getattr(mmap, "MAP_POPULATE", 0)
    if populate and size <= POPULATE_MAX_BYTES:
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED | populate, prot=mmap.PROT_READ)
    return mmap.mmap(fd, size, access=mmap.ACCESS_READ)


class TarShardRows(ShardRows):
    """Reads rows of one of our ``.tar`` shards through a read-only memory map and its ``.idx``."""

    def __init__(self, tar_path: str, index: RowIndex, label: str, cache: ShardCache | None = None) -> None:
        self.path = tar_path
        self.label = label
        self.index = index
        self._cache = cache
        self._file = open(tar_path, "rb")  # noqa: SIM115 - kept open for the memory map's lifetime
        size = os.fstat(self._file.fileno()).st_size
        self._map = _map_read_only(self._file.fileno(), size) if size else None
        self._view = memoryview(self._map) if self._map is not None else memoryview(b"")
        self._dtype = np.dtype("<u2") if index.token_itemsize == 2 else np.dtype("<u4")
        self._isz = self._dtype.itemsize
        self._words, self._doclens = index.words, index.doclens
        self._tokens = np.frombuffer(self._view[: size - size % self._dtype.itemsize], dtype=self._dtype)
        # What the loader's batch gather slices (see fm_loader.gather.BatchAssembler): the index records, the
        # tar bytes and the doclens array, each as a byte memoryview.
        self.itemsize = self._isz
        self.record_bytes: memoryview = index.record_bytes
        self.token_bytes: memoryview = self._view
        self.doclens_bytes: memoryview = index.doclens_bytes

    def reread(self, start: int, nbytes: int) -> bytes:
        """Read ``nbytes`` at byte ``start`` of the tar from the file, bypassing the memory map.

        Args:
            start: Byte offset inside the tar.
            nbytes: Number of bytes.

        Returns:
            The bytes as they are on disk now.
        """
        return os.pread(self._file.fileno(), nbytes, start)

    def read_row(
        self, row: int, out: np.ndarray, slot: int, skip_corrupt: bool = False
    ) -> tuple[int, np.ndarray | None]:
        """Verify row ``row`` and copy it into ``out[slot]``: (tokens, document lengths), or (0, None) when the
        row is corrupt and ``skip_corrupt`` is set. Index fields come from the index's 64-bit word view as
        Python ints, so a row costs one checksum, one copy and a few attribute reads."""
        words, isz = self._words, self._isz
        base = row * RECORD_WORDS
        sizes = words[base + WORD_SIZES]
        n, docs = sizes & 0xFFFFFFFF, sizes >> 32
        off = words[base + WORD_TOKENS_OFFSET] // isz
        chunk = self._tokens[off : off + n]
        want = words[base + WORD_TOKENS_CHECKSUM]
        # row_checksum, without a Python call per row. ndarray is a buffer, but numpy's stubs declare
        # __buffer__ only for Python >= 3.12, so under 3.11 pyright does not see it as one.
        if xxhash.xxh3_64_intdigest(chunk) != want:  # pyright: ignore[reportArgumentType]
            fresh = self.reread(off * isz, n * isz)
            if row_checksum(fresh) != want:
                if not skip_corrupt:
                    raise CorruptRowError(self.label, row)
                logger.warning("skipping corrupt row %d of %s", row, self.label)
                return 0, None
            chunk = np.frombuffer(fresh, dtype=self._dtype)
        out[slot, :n] = chunk
        first_doc = words[base + WORD_DOC_START]
        return int(n), self._doclens[first_doc : first_doc + docs]

    def read(
        self, rows: np.ndarray, out: np.ndarray, slots: np.ndarray, skip_corrupt: bool = False
    ) -> ReadResult:
        lengths: list[int] = []
        doclens: list[np.ndarray] = []
        corrupt: list[int] = []
        for slot, row in zip(slots.tolist(), rows.tolist(), strict=True):
            n, docs = self.read_row(row, out, slot, skip_corrupt)
            if docs is None:
                corrupt.append(row)
                docs = self.index.doclens[:0]
            lengths.append(n)
            doclens.append(docs)
        return ReadResult(lengths, doclens, sum(lengths) * self._isz, corrupt)

    def close(self) -> None:
        self._tokens = np.zeros(0, self._dtype)
        self.token_bytes = memoryview(b"")
        try:
            self._view.release()
            if self._map is not None:
                self._map.close()
        except BufferError:  # a slice of the map is still referenced (e.g. by a traceback): the map closes
            pass  # when the last reference goes
        self._file.close()
        if self._cache is not None:
            self._cache.unpin(self.path)


class ManifestSource(Source):
    """All shards of one :class:`DatasetManifest`."""

    def __init__(self, manifest: DatasetManifest, cache: ShardCache | None = None, name: str = "") -> None:
        self.manifest = manifest
        self.name = name or manifest.name
        self.seq_len = manifest.seq_len
        self.vocab_size = manifest.vocab_size
        self.tokenizer_hash = manifest.tokenizer_hash
        self.shard_rows = np.fromiter(
            map(attrgetter("rows"), manifest.shards), dtype=np.int64, count=len(manifest.shards)
        )
        self.max_docs_per_row = max(map(attrgetter("max_docs_per_row"), manifest.shards), default=0)
        self.cache = cache or ShardCache()
        self.tar_token_dtype = token_dtype_for(manifest.vocab_size)
        self.namespace = manifest.namespace
        self.revoked = manifest.revoked
        self.origin = f"manifest {manifest.location or manifest.name + '/' + manifest.version}"
        self._fingerprint: str | None = None

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:  # one hash over every shard's sha256 and row count (computed once)
            h = hashlib.sha256()
            h.update(f"{self.manifest.schema_fingerprint}|{self.seq_len}|{self.vocab_size}".encode())
            shards = self.manifest.shards
            text = "".join(
                map("|{}:{}".format, map(attrgetter("sha256"), shards), map(attrgetter("rows"), shards))
            )
            h.update(text.encode())
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    def shard_label(self, shard: int) -> str:
        return self.manifest.shard_uri(self.manifest.shards[shard])

    @property
    def tokens(self) -> int:
        return self.manifest.tokens

    @property
    def shard_tokens(self) -> list[int]:
        return [entry.tokens for entry in self.manifest.shards]

    def shard_files(self, shard: int) -> list[str]:
        entry = self.manifest.shards[shard]
        return [self.manifest.index_uri(entry), self.manifest.shard_uri(entry)]

    def shard_key(self, shard: int) -> str:
        return self.manifest.shards[shard].sha256

    def open_shard(self, shard: int) -> TarShardRows:
        entry = self.manifest.shards[shard]
        tar_uri = self.manifest.shard_uri(entry)
        try:
            return self._open(entry, tar_uri)
        except OSError as exc:
            detail = f"missing or unreadable ({type(exc).__name__}: {exc}); `fm verify` lists the damage"
            raise CorruptShardError(tar_uri, self.manifest.location, detail) from exc

    def _open(self, entry: ShardEntry, tar_uri: str) -> TarShardRows:
        index_uri = self.manifest.index_uri(entry)
        index_bytes = read_bytes(self.cache.get(index_uri))
        if entry.index_sha256 and hashlib.sha256(index_bytes).hexdigest() != entry.index_sha256:
            raise CorruptRowError(tar_uri, -1, "row index sha256 differs from the manifest")
        index = decode_index(index_bytes, index_uri)
        if index.rows != entry.rows:
            raise CorruptRowError(tar_uri, -1, f"index has {index.rows} rows, manifest says {entry.rows}")
        local = self.cache.get(tar_uri, pin=is_remote(tar_uri))
        return TarShardRows(local, index, tar_uri, self.cache if is_remote(tar_uri) else None)
