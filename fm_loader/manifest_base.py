"""What every release manifest is, whatever its sample kind: one type with a ``kind``.

A manifest lists its shards (paths relative to the manifest's folder, or absolute URIs), its namespace and
revocation, and saves atomically as deterministic JSON. :meth:`Manifest.load` on this base class reads a
manifest of any kind (the registry in :mod:`fm_loader.kinds` picks the type); on a kind's own type it refuses
a manifest of another kind, naming both.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from fm_loader.storage import read_bytes, resolve_uri, write_bytes_atomic


class Manifest:
    """A release manifest of some sample kind (:class:`~fm_loader.manifest.DatasetManifest`,
    :class:`~fm_loader.media.manifest.MediaManifest`).

    Attributes:
        label: How messages name the type (``a packed-token``, ``a media``).
        location: Where the manifest was loaded from or saved to; relative shard paths resolve against it.
    """

    label: ClassVar[str] = "a"
    location: str
    name: str
    namespace: str
    revoked: dict[str, Any] | None
    shards: list[Any]

    @property
    def kind(self) -> str:
        """The sample kind (a key of :data:`fm_loader.kinds.KINDS`)."""
        raise NotImplementedError

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys, no timestamps)."""
        raise NotImplementedError

    def shard_uri(self, entry: Any) -> str:
        """Path or URI of ``entry``'s tar, resolved against :attr:`location`."""
        return resolve_uri(self.location, entry.path)

    @classmethod
    def from_doc(cls, doc: dict[str, Any], location: str = "") -> Self:
        """The manifest of a parsed JSON document (each kind's type builds its own)."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, text: str | bytes, location: str = "") -> Self:
        """Parse a manifest written by ``to_json``.

        Raises:
            ValueError: Not JSON, an unknown kind, a manifest of another kind than this type reads (on the base
                class: any kind), or a format this fm_loader does not read; the message names ``location``.
        """
        from fm_loader.kinds import parse_manifest

        return parse_manifest(text, location, cls)

    @classmethod
    def load(cls, path_or_uri: str, storage_options: dict[str, Any] | None = None) -> Self:
        """Read a manifest from a local path (a release folder means its ``manifest.json``) or a remote URI.

        Raises:
            FileNotFoundError: Nothing at the path, or a folder without ``manifest.json``.
            ValueError: See :meth:`from_json`.
        """
        from fm_loader.kinds import manifest_location

        location = manifest_location(path_or_uri)
        return cls.from_json(read_bytes(location, storage_options), location=location)

    def save(self, path_or_uri: str, storage_options: dict[str, Any] | None = None) -> None:
        """Write :meth:`to_json` atomically (temporary file and rename, or one PUT) and set :attr:`location`.

        Args:
            path_or_uri: Local path, ``file://`` or fsspec URI; local parent folders are created.
            storage_options: Passed to fsspec for remote URIs.
        """
        write_bytes_atomic(str(path_or_uri), self.to_json().encode(), storage_options)
        self.location = str(path_or_uri)
