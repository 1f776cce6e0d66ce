"""Errors of the media loader: refused datasets (namespace, revocation) and corrupt samples.

``NamespaceError`` and ``RevokedDatasetError`` mirror what the text loader raises for the same refusals; they
live here until both loaders share one definition.
"""

from __future__ import annotations

from fm_loader.sources import CorruptRowError


class DatasetRefusedError(ValueError):
    """The trainer may not read this dataset release (see the subclasses)."""


class NamespaceError(DatasetRefusedError):
    """The manifest's namespace is not one the trainer allowed (``allowed_namespaces``)."""


class RevokedDatasetError(DatasetRefusedError):
    """The manifest is marked revoked and the trainer did not pass ``allow_revoked=True``."""


class CorruptSampleError(CorruptRowError):
    """A media sample failed its checksum twice (read, then re-read), or its bytes do not decode.

    A :class:`~fm_loader.sources.CorruptRowError`, so handlers written for text shards catch it too.

    Attributes:
        shard: Path or URI of the shard.
        row: Sample index inside the shard.
        key: The sample's key (its WebDataset ``__key__``).
    """

    def __init__(self, shard: str, row: int, key: str, detail: str) -> None:
        RuntimeError.__init__(self, f"corrupt sample {row} ({key}) in shard {shard}: {detail}")
        self.shard = shard
        self.row = row
        self.key = key


def check_release(
    namespace: str, revoked: object, where: str, allowed_namespaces: tuple[str, ...], allow_revoked: bool
) -> None:
    """Refuse a release outside the trainer's namespaces, or a revoked one unless explicitly allowed.

    Args:
        namespace: The release's namespace.
        revoked: Its ``revoked`` field (``None`` while valid).
        where: Names the release (manifest path or name) in the message.
        allowed_namespaces: Namespaces the trainer may read.
        allow_revoked: Read a revoked release anyway.

    Raises:
        NamespaceError: ``namespace`` is not allowed.
        RevokedDatasetError: The release is revoked and ``allow_revoked`` is not set.
    """
    if namespace not in allowed_namespaces:
        raise NamespaceError(
            f"{where} belongs to namespace {namespace!r}, which this trainer may not read (allowed_namespaces="
            f"{tuple(allowed_namespaces)}); namespaces are walls: add it only if this run may train on it"
        )
    if revoked is not None and not allow_revoked:
        raise RevokedDatasetError(
            f"{where} is revoked ({revoked}); train on its successor, or pass allow_revoked=True to read it anyway"
        )
