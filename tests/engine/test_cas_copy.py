"""Putting a landed file into the CAS reads it once: the copy is hashed on the way and published only when
its bytes are the manifest's; otherwise nothing is left at the object's name, not even a temporary file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from fm_assets.engine import layout
from fm_assets.engine.hashing import copy_with_sha256
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.land import verify_into_cas


@pytest.fixture
def landed(tmp_path: Path) -> Path:
    path = tmp_path / "landed.bin"
    path.write_bytes(os.urandom(3 * (1 << 20) + 12345))  # several read blocks and a ragged end
    return path


def test_the_copy_is_the_file_and_its_digest_the_file_s(tmp_path: Path, landed: Path) -> None:
    copy = tmp_path / "copy.bin"
    assert copy_with_sha256(landed, copy, chunk=1 << 16) == hashlib.sha256(landed.read_bytes()).hexdigest()
    assert copy.read_bytes() == landed.read_bytes()


def test_bytes_that_are_the_manifest_s_are_stored_then_found_intact(tmp_path: Path, landed: Path) -> None:
    store = ObjectStore(str(tmp_path / "root"))
    sha = hashlib.sha256(landed.read_bytes()).hexdigest()
    assert verify_into_cas(store, landed, sha, "b1") == ("stored", sha)
    assert store.local_path(layout.cas_object(sha)).read_bytes() == landed.read_bytes()
    assert verify_into_cas(store, landed, sha, "b2") == ("duplicate", sha)


def test_bytes_that_are_not_the_manifest_s_are_not_stored(tmp_path: Path, landed: Path) -> None:
    store = ObjectStore(str(tmp_path / "root"))
    claimed = hashlib.sha256(b"what the manifest promised").hexdigest()
    stored, actual = verify_into_cas(store, landed, claimed, "b1")
    assert stored is None and actual == hashlib.sha256(landed.read_bytes()).hexdigest()
    folder = store.local_path(layout.cas_object(claimed)).parent
    assert not folder.exists() or not any(folder.iterdir())  # no object, no temporary left behind
