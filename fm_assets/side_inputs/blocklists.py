"""The blocklist side input: the lists file plus every recorded revocation; the version is their fingerprint.

``with_revocations`` merges the revocations recorded under the storage root (``fm revoke``) into the file's
lists, so recording a revocation changes the fingerprint and recomputes blocklist and what follows."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fm_assets.compliance.revocations import revocation_blocklists
from fm_assets.engine.store import ObjectStore
from fm_assets.transforms.blocklist.lists import Blocklists


@dataclass(frozen=True)
class BlocklistSource:
    """Where the blocklists come from (a file, or none); ``load`` re-reads the file only when it changed."""

    path: str | None = None

    def load(self) -> Blocklists:
        if not self.path:
            return Blocklists()
        file = Path(self.path)
        if not file.is_file():
            raise FileNotFoundError(f"blocklist file {self.path} does not exist (FM_BLOCKLIST_FILE)")
        return _load_cached(str(file.resolve()), file.stat().st_mtime_ns)


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int) -> Blocklists:
    return Blocklists.load(path)


def with_revocations(lists: Blocklists, store: ObjectStore, batch: str | None = None) -> Blocklists:
    """``lists`` plus the revoked pairs and document hashes of the revocations recorded in ``store`` (for
    ``batch``: the pairs that can match it and every hash)."""
    revoked = revocation_blocklists(store, batch)
    if not (revoked.doc_hashes or revoked.revoked):
        return lists  # no revocation: the file's fingerprint, unchanged
    return Blocklists(
        url_domains=lists.url_domains,
        doc_hashes=lists.doc_hashes + revoked.doc_hashes,
        revoked=lists.revoked + revoked.revoked,
    ).normalised()
