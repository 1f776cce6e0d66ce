"""Dataset manifest: the list of shards of one dataset (version or partition) and what they were made with.

Shard paths may be relative (resolved against the manifest's own location) or absolute URIs
(local paths, ``file://``, ``s3://``...). The JSON is deterministic (sorted keys, no timestamps).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from fm_loader.format import FORMAT_VERSION, ShardInfo, schema_fingerprint
from fm_loader.storage import read_bytes, resolve_uri, write_bytes_atomic


@dataclass(frozen=True)
class ShardEntry:
    """One shard as listed in a manifest. ``index_path`` defaults to ``path`` with ``.tar`` -> ``.idx``."""

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
        if self.index_path:
            return self.index_path
        return self.path[: -len(".tar")] + ".idx" if self.path.endswith(".tar") else self.path + ".idx"

    @classmethod
    def from_info(cls, info: ShardInfo, folder: str = "") -> ShardEntry:
        """Entry for a shard written by :func:`fm_loader.format.encode_shard` into ``folder``."""
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


@dataclass
class DatasetManifest:
    """A dataset's shards plus the facts a trainer pins: seq_len, vocabulary, tokenizer, code version."""

    name: str
    version: str
    seq_len: int
    vocab_size: int
    tokenizer_hash: str
    code_version: str
    shards: list[ShardEntry] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    extra: dict = field(default_factory=dict)
    location: str = field(default="", compare=False, repr=False)  # where it was loaded from, not serialised

    @property
    def schema_fingerprint(self) -> str:
        return schema_fingerprint(self.vocab_size)

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.shards)

    @property
    def max_docs_per_row(self) -> int:
        return max((s.max_docs_per_row for s in self.shards), default=0)

    def shard_uri(self, entry: ShardEntry) -> str:
        return resolve_uri(self.location, entry.path)

    def index_uri(self, entry: ShardEntry) -> str:
        return resolve_uri(self.location, entry.resolved_index_path)

    def to_json(self) -> str:
        doc = {
            "code_version": self.code_version,
            "extra": self.extra,
            "format_version": self.format_version,
            "name": self.name,
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

    @classmethod
    def from_json(cls, text: str | bytes, location: str = "") -> DatasetManifest:
        doc = json.loads(text)
        manifest = cls(
            name=doc["name"],
            version=doc["version"],
            seq_len=int(doc["seq_len"]),
            vocab_size=int(doc["vocab_size"]),
            tokenizer_hash=doc["tokenizer_hash"],
            code_version=doc["code_version"],
            shards=[ShardEntry(**s) for s in doc["shards"]],
            format_version=int(doc.get("format_version", FORMAT_VERSION)),
            extra=doc.get("extra", {}),
            location=location,
        )
        stored = doc.get("schema_fingerprint")
        if stored and stored != manifest.schema_fingerprint:
            raise ValueError(
                f"manifest {location or manifest.name}: schema fingerprint {stored} does not match this "
                f"fm_loader's row format ({manifest.schema_fingerprint}); upgrade fm_loader or re-shard"
            )
        return manifest

    @classmethod
    def load(cls, path_or_uri: str, storage_options: dict[str, Any] | None = None) -> DatasetManifest:
        return cls.from_json(read_bytes(path_or_uri, storage_options), location=str(path_or_uri))

    def save(self, path_or_uri: str, storage_options: dict[str, Any] | None = None) -> None:
        write_bytes_atomic(str(path_or_uri), self.to_json().encode(), storage_options)
        self.location = str(path_or_uri)
