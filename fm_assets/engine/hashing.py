"""The hashes the platform is built on: stable hashes of settings, sha256 of files, content hashes of text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def stable_hash(obj: Any, length: int = 16) -> str:
    """A hex digest of ``obj`` that does not depend on dict order (stage keys, fingerprints of settings)."""
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(payload).hexdigest()[:length]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def content_hash(text: str) -> bytes:
    """16-byte digest of a document's text (exact dedup)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]
