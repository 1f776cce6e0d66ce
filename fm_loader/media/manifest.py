"""Media dataset manifest: the shards of one image-text or audio-text release and what they were made with.

The same conventions as :class:`fm_loader.manifest.DatasetManifest`: shard paths relative to the manifest's
folder or absolute URIs, deterministic JSON (sorted keys, no timestamps), ``namespace`` and ``revoked``, saved
atomically to a local path or a remote URI. Each entry carries a shape summary (the default-bucket histogram,
or the duration range); the per-sample shapes the loader buckets by live in each shard's sample index, which
the entry pins by sha256 (a per-sample list in the manifest itself would grow with the dataset).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from fm_loader.manifest_base import Manifest
from fm_loader.media.format import MEDIA_FORMAT_VERSION, MediaShardInfo, media_schema_fingerprint
from fm_loader.storage import resolve_uri

MODALITIES = ("image-text", "audio-text", "video-text")
MANIFEST_KIND = "fm_loader.media-manifest"


@dataclass(frozen=True)
class MediaShardEntry:
    """One media shard as listed in a manifest.

    Attributes:
        path: The tar, relative to the manifest's folder or an absolute path / URI.
        sha256: SHA-256 of the tar (hex).
        samples: Number of samples in the shard.
        bytes: Size of the tar in bytes.
        index_path: The sample index, like ``path``.
        index_sha256: SHA-256 of the sample index (hex); the loader verifies it.
        shape_summary: :attr:`fm_loader.media.format.MediaShardInfo.shape_summary`.
    """

    path: str
    sha256: str
    samples: int
    bytes: int
    index_path: str
    index_sha256: str
    shape_summary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_info(cls, info: MediaShardInfo, folder: str = "") -> MediaShardEntry:
        """Entry for a shard written by :func:`fm_loader.media.format.encode_media_shard` into ``folder``.

        Args:
            info: The encoded shard's summary (``EncodedMediaShard.info``).
            folder: Where the shard's files were written, relative to the manifest (or absolute); empty for the
                manifest's own folder.
        """
        prefix = folder.rstrip("/") + "/" if folder else ""
        return cls(
            path=prefix + info.tar_name,
            sha256=info.sha256,
            samples=info.samples,
            bytes=info.bytes,
            index_path=prefix + info.index_name,
            index_sha256=info.index_sha256,
            shape_summary=dict(info.shape_summary),
        )


@dataclass
class MediaManifest(Manifest):
    """A media release's shards plus the facts a trainer checks.

    Attributes:
        name: Dataset name.
        version: Dataset version (or partition).
        modality: ``"image-text"``, ``"audio-text"`` or ``"video-text"``; every shard holds that modality.
        code_version: Version of the code that made the dataset.
        shards: The shards, in order.
        namespace: The tenant namespace of every sample (``cloud``, ``on_device``, ...); a trainer names the
            namespaces it may read.
        revoked: ``None`` while the release is valid, else a JSON object (when, why, superseded by).
        tokenizer_hash: Tokenizer of the samples' ``caption_tokens``; empty when they have none.
        format_version: Media shard format version.
        extra: Free-form JSON-serialisable metadata.
        location: Where the manifest was loaded from or saved to; relative shard paths resolve against it.
            Not serialised.
    """

    name: str
    version: str
    modality: str
    code_version: str
    shards: list[MediaShardEntry] = field(default_factory=list)
    namespace: str = "cloud"
    revoked: dict[str, Any] | None = None
    tokenizer_hash: str = ""
    format_version: int = MEDIA_FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    location: str = field(default="", compare=False, repr=False)
    label: ClassVar[str] = "a media"

    def __post_init__(self) -> None:
        if self.modality not in MODALITIES:
            raise ValueError(
                f"media manifest {self.name!r}: modality {self.modality!r} is not one of {MODALITIES}"
            )

    @property
    def samples(self) -> int:
        """Samples over all shards."""
        return sum(s.samples for s in self.shards)

    @property
    def schema_fingerprint(self) -> str:
        return media_schema_fingerprint(self.format_version)

    def index_uri(self, entry: MediaShardEntry) -> str:
        """Path or URI of ``entry``'s sample index, resolved against :attr:`location`."""
        return resolve_uri(self.location, entry.index_path)

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys, no timestamps) with the derived sample total and fingerprint."""
        doc = {
            "kind": MANIFEST_KIND,
            "name": self.name,
            "version": self.version,
            "modality": self.modality,
            "code_version": self.code_version,
            "namespace": self.namespace,
            "revoked": self.revoked,
            "tokenizer_hash": self.tokenizer_hash,
            "format_version": self.format_version,
            "schema_fingerprint": self.schema_fingerprint,
            "extra": self.extra,
            "samples": self.samples,
            "shards": [asdict(s) for s in self.shards],
        }
        return json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n"

    @property
    def kind(self) -> str:
        """The sample kind (:mod:`fm_loader.kinds`): the modality."""
        return self.modality

    @classmethod
    def from_doc(cls, doc: dict[str, Any], location: str = "") -> MediaManifest:
        """The manifest of a parsed JSON document (see :meth:`from_json`)."""
        where = location or doc.get("name", "<manifest>")
        if doc.get("kind") != MANIFEST_KIND:
            raise ValueError(
                f"{where} is not a media manifest (kind {doc.get('kind')!r}); text datasets load with "
                "fm_loader.Loader"
            )
        manifest = cls(
            name=doc["name"],
            version=doc["version"],
            modality=doc["modality"],
            code_version=doc["code_version"],
            shards=[MediaShardEntry(**s) for s in doc["shards"]],
            namespace=doc.get("namespace", "cloud"),
            revoked=doc.get("revoked"),
            tokenizer_hash=doc.get("tokenizer_hash", ""),
            format_version=int(doc.get("format_version", MEDIA_FORMAT_VERSION)),
            extra=doc.get("extra", {}),
            location=location,
        )
        if manifest.format_version != MEDIA_FORMAT_VERSION:
            raise ValueError(
                f"{where}: media format version {manifest.format_version}; this fm_loader reads "
                f"{MEDIA_FORMAT_VERSION}: upgrade fm_loader"
            )
        stored = doc.get("schema_fingerprint")
        if stored and stored != manifest.schema_fingerprint:
            raise ValueError(
                f"{where}: schema fingerprint {stored} does not match this fm_loader's media format "
                f"({manifest.schema_fingerprint}); upgrade fm_loader or re-shard"
            )
        return manifest
