"""Revocation records: what a request must name, how it reaches the blocklist stage's lists (and its key),
and how releases are marked revoked."""

from __future__ import annotations

import hashlib

import pytest

from fm_assets.compliance.blast_radius import (
    AffectedDocuments,
    base_doc_id,
    locate_in_releases,
    mark_revoked,
    read_release,
    shard_paths,
)
from fm_assets.compliance.namespaces import NamespaceWallError, curated_table_name, lance_uri, release_name
from fm_assets.compliance.revocations import (
    RevocationError,
    list_revocations,
    matches_batch,
    record_revocation,
    revocation_blocklists,
)
from fm_assets.side_inputs.blocklists import with_revocations
from fm_assets.transforms.blocklist.lists import Blocklists
from fm_loader.manifest import DatasetManifest
from fm_loader.media.manifest import MediaManifest, MediaShardEntry

HASH = hashlib.sha256(b"a page with a phone number").hexdigest()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"source": "forum"}, "--reason"),
        ({"source": "forum", "reason": "  "}, "--reason"),
        ({"reason": "x"}, "name what to revoke"),
        ({"reason": "x", "source": "forum", "doc_hashes": [HASH]}, "not both"),
        ({"reason": "x", "source": "*", "license_id": "*"}, "revoke everything"),
        ({"reason": "x", "doc_hashes": ["abc"]}, "not a sha256"),
        ({"reason": "x", "license_id": "Proprietary"}, "LicenseRef-"),
    ],
)
def test_a_revocation_must_say_what_and_why(store, kwargs, match):
    with pytest.raises(RevocationError, match=match):
        record_revocation(store, **kwargs)
    assert list_revocations(store) == []


def test_recorded_revocations_feed_the_blocklist_and_change_its_fingerprint(store):
    file_lists = Blocklists(url_domains=("spam.example",))
    assert with_revocations(file_lists, store) == file_lists  # none recorded: the file's lists, same version
    pair = record_revocation(store, reason="LEGAL-1", source="forum", license_id="cc-by-sa-4.0")
    assert (pair.source, pair.license) == ("forum", "CC-BY-SA-4.0")  # the spelling landing records
    record_revocation(store, reason="LEGAL-2", doc_hashes=[HASH.upper()])
    merged = with_revocations(file_lists, store)
    assert merged.revoked == (("forum", "CC-BY-SA-4.0"),) and merged.doc_hashes == (HASH,)
    assert merged.url_domains == ("spam.example",)
    assert merged.fingerprint() != file_lists.fingerprint()
    assert revocation_blocklists(store).revoked == (("forum", "CC-BY-SA-4.0"),)
    assert [r.reason for r in list_revocations(store)] == ["LEGAL-1", "LEGAL-2"]


def test_a_pair_with_a_wildcard_matches_every_batch_of_that_source(store):
    revocation = record_revocation(store, reason="x", source="forum")
    assert revocation.license == "*"
    assert matches_batch(revocation, "forum", "MIT") and not matches_batch(revocation, "docs", "MIT")


def test_mark_revoked_rewrites_manifest_and_card_once(store):
    manifest = DatasetManifest(
        name="fm-demo",
        version="v1",
        seq_len=8,
        vocab_size=256,
        tokenizer_hash="t",
        code_version="c",
        shards=[],
    )
    store.write_bytes("datasets/fm-demo/v1/manifest.json", manifest.to_json().encode())
    store.write_json("datasets/fm-demo/v1/card.json", {"name": "fm-demo"})
    first = record_revocation(store, reason="first", source="forum")
    second = record_revocation(store, reason="second", source="docs")
    assert mark_revoked(store, "fm-demo", "v1", first, superseded_by="v2")
    assert not mark_revoked(store, "fm-demo", "v1", second, superseded_by="v3")  # the first mark stays
    loaded = DatasetManifest.from_json(store.read_bytes("datasets/fm-demo/v1/manifest.json"))
    assert loaded.revoked == {
        "at": first.at,
        "reason": "first",
        "revocation_id": first.id,
        "superseded_by": "v2",
    }
    assert store.read_json("datasets/fm-demo/v1/card.json")["revoked"] == loaded.revoked


def test_per_namespace_names_and_the_pieces_of_split_documents():
    assert release_name("fm-demo", "cloud") == "fm-demo"
    assert release_name("fm-demo", "on_device") == "fm-demo-on_device"
    assert curated_table_name("on_device") == "fm.curated_documents_on_device"
    assert lance_uri("/r/lance/documents.lance", "on_device") == "/r/lance/documents_on_device.lance"
    assert lance_uri("s3://b/p/documents.lance", "cloud") == "s3://b/p/documents.lance"
    with pytest.raises(NamespaceWallError):
        release_name("fm-demo", "quarantine")
    assert base_doc_id("abc:3@1024") == "abc:3"


def test_a_pair_revocation_changes_only_the_lists_of_the_batches_it_matches(store, land):
    forum, docs = land("forum", "CC-BY-SA-4.0"), land("docs", "MIT")
    before = {b: with_revocations(Blocklists(), store, b).fingerprint() for b in (forum, docs)}
    record_revocation(store, reason="LEGAL-1", source="forum", license_id="CC-BY-SA-4.0")
    assert with_revocations(Blocklists(), store, forum).fingerprint() != before[forum]
    assert with_revocations(Blocklists(), store, docs).fingerprint() == before[docs]  # no recompute there
    record_revocation(store, reason="LEGAL-2", doc_hashes=[HASH])  # a hash can be in any batch
    assert with_revocations(Blocklists(), store, docs).fingerprint() != before[docs]


def test_revocation_reads_image_releases_beside_text_ones(store):
    """A root with an image-text release: the blast radius and the revoked mark read it as a media manifest
    (it used to be parsed as a text one: ``ShardEntry.__init__() got an unexpected keyword argument 'samples'``)."""
    entry = MediaShardEntry("shards/shard-000000.tar", "0" * 64, 3, 10, "shards/shard-000000.idx", "1" * 64)
    media = MediaManifest(
        name="fm-demo-image", version="v1", modality="image-text", code_version="c", shards=[entry]
    )
    text = DatasetManifest(
        name="fm-demo", version="v1", seq_len=8, vocab_size=256, tokenizer_hash="t", code_version="c"
    )
    empty = MediaManifest(name="fm-demo-image", version="v1", modality="image-text", code_version="c")
    store.write_bytes("datasets/fm-demo-image/v1/manifest.json", empty.to_json().encode())
    store.write_bytes("datasets/fm-demo/v1/manifest.json", text.to_json().encode())
    assert (
        locate_in_releases(store, AffectedDocuments()) == []
    )  # reads both kinds (no shards: nothing to scan)
    store.write_bytes("datasets/fm-demo-image/v1/manifest.json", media.to_json().encode())
    assert shard_paths("fm-demo-image", "v1", read_release(store, "fm-demo-image", "v1")) == [
        "datasets/fm-demo-image/v1/shards/shard-000000.tar"
    ]
    revocation = record_revocation(store, reason="LEGAL-3", source="photos")
    assert mark_revoked(store, "fm-demo-image", "v1", revocation, superseded_by=None)
    marked = MediaManifest.from_json(store.read_bytes("datasets/fm-demo-image/v1/manifest.json"))
    assert marked.revoked is not None and marked.revoked["revocation_id"] == revocation.id
    assert marked.shards == [entry]
