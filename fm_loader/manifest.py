"""Dataset manifest: the list of shards of one dataset (version or partition) and what they were made with.

Shard paths may be relative (resolved against the manifest's own location) or absolute URIs
(local paths, ``file://``, ``s3://``...). The JSON is deterministic (sorted keys, no timestamps).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import asdict, dataclass, field, fields
from itertools import repeat
from typing import Any, ClassVar

from fm_loader.format import FORMAT_VERSION, SUPPORTED_FORMAT_VERSIONS, ShardInfo, schema_fingerprint
from fm_loader.manifest_base import Manifest
from fm_loader.storage import resolve_uri


@dataclass(frozen=True)
class ShardEntry:
    """One shard as listed in a manifest.

    Attributes:
        path: The tar, relative to the manifest's folder or an absolute path / URI.
        sha256: SHA-256 of the tar (hex).
        rows: Number of rows in the shard.
        tokens: Number of tokens in the shard.
        bytes: Size of the tar in bytes (0 if unknown).
        index_path: The row index, like ``path``; empty means ``path`` with ``.tar`` replaced by ``.idx``.
        index_sha256: SHA-256 of the row index (hex); when set, the loader verifies it.
        max_docs_per_row: Largest number of document segments in one row (0 if unknown).
    """

    path: str
    sha256: str
    rows: int
    tokens: int
    bytes: int = 0
    index_path: str = ""
    index_sha256: str = ""
    max_docs_per_row: int = 0

    @property
    def resolved_index_path(self) -> str:
        """``index_path``, or the default derived from ``path`` when it is empty."""
        if self.index_path:
            return self.index_path
        return self.path[: -len(".tar")] + ".idx" if self.path.endswith(".tar") else self.path + ".idx"

    @classmethod
    def from_info(cls, info: ShardInfo, folder: str = "") -> ShardEntry:
        """Entry for a shard written by :func:`fm_loader.format.encode_shard` into ``folder``.

        Args:
            info: The encoded shard's summary (``EncodedShard.info``).
            folder: Where the shard's files were written, relative to the manifest (or absolute);
                empty for the manifest's own folder.

        Returns:
            The entry, with ``path`` and ``index_path`` under ``folder``.
        """
        prefix = folder.rstrip("/") + "/" if folder else ""
        return cls(
            path=prefix + info.tar_name,
            sha256=info.sha256,
            rows=info.rows,
            tokens=info.tokens,
            bytes=info.bytes,
            index_path=prefix + info.index_name,
            index_sha256=info.index_sha256,
            max_docs_per_row=info.max_docs_per_row,
        )


_ENTRY_KEYS = dict.fromkeys(f.name for f in fields(ShardEntry)).keys()


def _entries(docs: list[dict[str, Any]]) -> list[ShardEntry]:
    """``[ShardEntry(**d) for d in docs]``, faster for manifests of 100k shards.

    When every entry has exactly the dataclass's fields (what :meth:`DatasetManifest.to_json` writes), each
    JSON object becomes its entry's ``__dict__`` as it is (the fields the generated ``__init__`` would store),
    in C-level passes; otherwise every entry goes through ``__init__`` (defaults, ``TypeError`` on unknown keys).
    """
    if not all(map(_ENTRY_KEYS.__eq__, map(dict.keys, docs))):
        return [ShardEntry(**doc) for doc in docs]
    entries = list(map(object.__new__, repeat(ShardEntry, len(docs))))
    deque(map(object.__setattr__, entries, repeat("__dict__"), docs), maxlen=0)  # frozen: no __setattr__
    return entries


@dataclass
class DatasetManifest(Manifest):
    """A dataset's shards plus the facts a trainer pins: seq_len, vocabulary, tokenizer, code version.

    Attributes:
        name: Dataset name.
        version: Dataset version (or partition).
        seq_len: Row length of every shard.
        vocab_size: Vocabulary size of every shard.
        tokenizer_hash: Identifies the tokenizer the rows were made with (checked by the loader's pins).
        code_version: Version of the code that made the dataset.
        shards: The shards, in order.
        format_version: Shard format version (:data:`fm_loader.format.FORMAT_VERSION`).
        extra: Free-form JSON-serialisable metadata.
        namespace: The tenant namespace every row belongs to (``cloud``, ``on_device``, ...); a release never
            mixes namespaces and a trainer names the ones it may read. Manifests written before namespaces
            were recorded load as ``cloud``.
        revoked: ``None`` while the release is valid; once data in it is revoked, a JSON object such as
            ``{"at": <ISO time>, "reason": ..., "revocation_id": ..., "superseded_by": <version or null>}``.
        location: Where the manifest was loaded from or saved to; relative shard paths resolve against it.
            Not serialised.
    """

    name: str
    version: str
    seq_len: int
    vocab_size: int
    tokenizer_hash: str
    code_version: str
    shards: list[ShardEntry] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    extra: dict = field(default_factory=dict)
    namespace: str = "cloud"
    revoked: dict[str, Any] | None = None
    location: str = field(default="", compare=False, repr=False)  # where it was loaded from, not serialised
    label: ClassVar[str] = "a packed-token"

    @property
    def schema_fingerprint(self) -> str:
        """Fingerprint of the row layout for this vocabulary size (stored in the JSON and checked on load)."""
        return schema_fingerprint(self.vocab_size, self.format_version)

    @property
    def rows(self) -> int:
        """Rows over all shards."""
        return sum(s.rows for s in self.shards)

    @property
    def tokens(self) -> int:
        """Tokens over all shards."""
        return sum(s.tokens for s in self.shards)

    @property
    def max_docs_per_row(self) -> int:
        """Largest ``max_docs_per_row`` of the shards (0 when unknown or no shards)."""
        return max((s.max_docs_per_row for s in self.shards), default=0)

    def index_uri(self, entry: ShardEntry) -> str:
        """Path or URI of ``entry``'s row index, resolved against :attr:`location`."""
        return resolve_uri(self.location, entry.resolved_index_path)

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys, no timestamps) including the derived totals and fingerprint."""
        doc = {
            "code_version": self.code_version,
            "extra": self.extra,
            "format_version": self.format_version,
            "name": self.name,
            "namespace": self.namespace,
            "revoked": self.revoked,
            "schema_fingerprint": self.schema_fingerprint,
            "seq_len": self.seq_len,
            "shards": [asdict(s) for s in self.shards],
            "tokenizer_hash": self.tokenizer_hash,
            "version": self.version,
            "vocab_size": self.vocab_size,
            "rows": self.rows,
            "tokens": self.tokens,
        }
        return json.dumps(doc, sort_keys=True, indent=1) + "\n"

    @property
    def kind(self) -> str:
        """The sample kind (:mod:`fm_loader.kinds`): packed token rows."""
        return "packed-tokens"

    @classmethod
    def from_doc(cls, doc: dict[str, Any], location: str = "") -> DatasetManifest:
        """The manifest of a parsed JSON document (see :meth:`from_json`)."""
        manifest = cls(
            name=doc["name"],
            version=doc["version"],
            seq_len=int(doc["seq_len"]),
            vocab_size=int(doc["vocab_size"]),
            tokenizer_hash=doc["tokenizer_hash"],
            code_version=doc["code_version"],
            shards=_entries(doc["shards"]),
            format_version=int(doc.get("format_version", FORMAT_VERSION)),
            extra=doc.get("extra", {}),
            namespace=doc.get("namespace", "cloud"),
            revoked=doc.get("revoked"),
            location=location,
        )
        if manifest.format_version not in SUPPORTED_FORMAT_VERSIONS:
            raise ValueError(
                f"manifest {location or manifest.name}: shard format version {manifest.format_version}; this "
                f"fm_loader reads versions {SUPPORTED_FORMAT_VERSIONS}: upgrade fm_loader"
            )
        stored = doc.get("schema_fingerprint")
        if stored and stored != manifest.schema_fingerprint:
            raise ValueError(
                f"manifest {location or manifest.name}: schema fingerprint {stored} does not match this "
                f"fm_loader's row format ({manifest.schema_fingerprint}); upgrade fm_loader or re-shard"
            )
        return manifest
