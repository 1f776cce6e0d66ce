"""The blocklist side input: which file the lists come from; the version is the lists' fingerprint."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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
