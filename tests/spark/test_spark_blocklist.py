"""Blocklist joins on Spark: domains (with subdomains), document hashes, revoked (source, licence)."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fm_assets.transforms.blocklist.joins import Blocklists, run_blocklists

pytestmark = pytest.mark.spark

DOCS = [
    ("d1", "https://News.Example.com:8080/a?b=1", "hello", "crawl", "CC-BY"),
    ("d2", "not a url ::", "fine", "crawl", "CC-BY"),
    ("d3", None, "secret text", "forum", "CC-BY-NC"),
    ("d4", "http://example.org/", "ok", "crawl", "MIT"),
    ("d5", "https://bad.org/x", "secret text", "forum", "Apache-2.0"),
    ("d6", "https://notexample.com/", "ok", "crawl", "CC-BY"),
]


def test_blocklists_remove_with_reasons(spark, tmp_path):
    path = str(tmp_path / "docs.parquet")
    pq.write_table(
        pa.table(
            {k: [r[i] for r in DOCS] for i, k in enumerate(["doc_id", "url", "text", "source", "license"])}
        ),
        path,
    )
    secret = hashlib.sha256(b"secret text").hexdigest()
    list_file = tmp_path / "lists.yaml"
    list_file.write_text(
        "version: v1\nurl_domains: [example.com, BAD.org.]\n"
        f"doc_hashes: [{secret.upper()}]\nrevoked:\n  - {{source: forum, license: CC-BY-NC}}\n  - ['*', MIT]\n"
    )
    lists = Blocklists.load(str(list_file))
    removed = {r["doc_id"]: r for r in run_blocklists(spark, [path], lists).to_pylist()}
    assert {k: v["reason"] for k, v in removed.items()} == {
        "d1": "blocked_domain",  # subdomain of example.com
        "d3": "revoked_license",  # also hash-blocked: both recorded in details
        "d4": "revoked_license",
        "d5": "blocked_domain",
    }
    assert set(json.loads(removed["d3"]["details"])) == {"revoked_license", "blocked_doc_hash"}
    assert json.loads(removed["d5"]["details"])["blocked_doc_hash"]["sha256"] == secret
    assert run_blocklists(spark, [path], Blocklists()).num_rows == 0


def test_list_version_is_content_fingerprint(tmp_path):
    a = Blocklists(url_domains=("Example.com", "x.org"), revoked=(("s", "*"),))
    b = Blocklists(url_domains=("x.org", "example.com."), revoked=(("s", "*"),))
    (tmp_path / "l.json").write_text(
        json.dumps({"url_domains": ["x.org", "example.com"], "revoked": [["s", "*"]]})
    )
    assert a.fingerprint() == b.fingerprint() == Blocklists.load(str(tmp_path / "l.json")).fingerprint()
    assert a.fingerprint() != Blocklists(url_domains=("example.com",)).fingerprint()
