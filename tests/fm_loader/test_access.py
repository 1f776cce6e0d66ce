"""Namespace walls and revoked releases: each breach is refused with a message that says what to do."""

from __future__ import annotations

import logging
import os

import pytest
from loader_helpers import collect, make_dataset

from fm_loader import DatasetManifest, Loader, NamespaceError, RevokedDatasetError

MDS_TOKENS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mds", "tokens")


def _with(path: str, **fields) -> str:
    manifest = DatasetManifest.load(path)
    for key, value in fields.items():
        setattr(manifest, key, value)
    manifest.save(path)
    return path


def test_a_manifest_of_another_namespace_is_refused_naming_it_and_the_fix(tmp_path):
    path = _with(make_dataset(str(tmp_path), [5, 5]), namespace="on_device")
    with pytest.raises(NamespaceError) as err:
        Loader(path, global_batch_size=2)
    message = str(err.value)
    assert path in message and "'on_device'" in message and "['cloud']" in message
    assert "allowed_namespaces=('cloud', 'on_device')" in message
    assert len(collect(Loader(path, global_batch_size=2, allowed_namespaces=("on_device",)))) == 10


def test_the_default_allows_cloud_only_and_old_manifests_are_cloud(tmp_path):
    path = make_dataset(str(tmp_path), [4])
    assert len(collect(Loader(path, global_batch_size=2))) == 4
    with pytest.raises(NamespaceError, match=r"'cloud'.*allowed: \['on_device'\]"):
        Loader(path, global_batch_size=2, allowed_namespaces=["on_device"])


def test_a_bare_string_of_namespaces_is_refused(tmp_path):
    path = make_dataset(str(tmp_path), [4])
    with pytest.raises(ValueError, match="collection of names such as"):
        Loader(path, global_batch_size=2, allowed_namespaces="cloud")


def test_a_revoked_release_refuses_with_reason_id_and_successor(tmp_path):
    revoked = {"reason": "licence withdrawn", "revocation_id": "rev-7", "superseded_by": "v2"}
    path = _with(make_dataset(str(tmp_path), [4]), revoked=revoked)
    with pytest.raises(RevokedDatasetError) as err:
        Loader(path, global_batch_size=2)
    message = str(err.value)
    for part in ("licence withdrawn", "rev-7", "'v2'", "allow_revoked=True", path):
        assert part in message


def test_allow_revoked_loads_with_a_warning(tmp_path, caplog):
    path = _with(make_dataset(str(tmp_path), [4]), revoked={"reason": "takedown", "superseded_by": None})
    with caplog.at_level(logging.WARNING, logger="fm_loader.access"):
        ids = collect(Loader(path, global_batch_size=2, allow_revoked=True))
    assert len(ids) == 4
    assert any("takedown" in r.message and "allow_revoked=True" in r.message for r in caplog.records)
    assert not any("superseded" in r.message for r in caplog.records)


def test_mds_sources_take_their_namespace_from_the_mixture_entry(tmp_path):
    entry = {"mds": MDS_TOKENS, "seq_len": 32, "vocab_size": 1000, "namespace": "on_device"}
    with pytest.raises(NamespaceError, match=r"mds .*'on_device'"):
        Loader({"sources": [entry]}, global_batch_size=2)
    allowed = Loader({"sources": [entry]}, global_batch_size=2, allowed_namespaces={"on_device"})
    assert allowed.epoch_rows > 0
    plain = {k: v for k, v in entry.items() if k != "namespace"}
    assert Loader({"sources": [plain]}, global_batch_size=2).epoch_rows == allowed.epoch_rows


def test_one_forbidden_source_in_a_mixture_refuses_the_whole_mixture(tmp_path):
    good = make_dataset(str(tmp_path / "good"), [4], name="good")
    bad = _with(make_dataset(str(tmp_path / "bad"), [4], name="bad"), namespace="quarantine")
    mixture = {"sources": [{"manifest": good}, {"manifest": bad}]}
    with pytest.raises(NamespaceError, match=r"source 'bad'.*'quarantine'"):
        Loader(mixture, global_batch_size=2)


def test_a_forbidden_mds_text_source_is_refused_before_it_is_tokenized(tmp_path):
    text = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mds", "text")
    entry = {"mds": text, "text_column": "text", "tokenizer": "/nonexistent/tokenizer.json", "seq_len": 32}
    # the tokenizer path does not exist: opening the source would fail with FileNotFoundError instead
    with pytest.raises(NamespaceError, match=r"'on_device'"):
        Loader({"sources": [{**entry, "namespace": "on_device"}]}, global_batch_size=2)
