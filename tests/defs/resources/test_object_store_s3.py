"""The object store's S3 path against a real S3-compatible server (moto in server mode) on loopback."""

from __future__ import annotations

import boto3

from fm_assets.defs.resources.object_store import ObjectStoreResource


def test_s3_store_round_trip(s3_env, tmp_path):
    s3_env = s3_env["endpoint"]
    store = ObjectStoreResource(root="s3://fm-test/prefix", s3_endpoint_url=s3_env).store()
    assert not store.is_local
    store.write_json("a/b.json", {"x": 1})
    local = tmp_path / "blob.bin"
    local.write_bytes(b"\x00\x01" * 1000)
    store.put_file(local, "a/c.bin")
    assert store.read_json("a/b.json") == {"x": 1}
    assert store.read_bytes("a/c.bin") == local.read_bytes()
    assert store.list("a") == ["a/b.json", "a/c.bin"]
    with store.local_copy("a/c.bin") as copy:
        assert copy.read_bytes() == local.read_bytes()
    # the object really is in the bucket, seen through a different client
    client = boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1")
    body = client.get_object(Bucket="fm-test", Key="prefix/a/b.json")["Body"].read()
    assert b'"x": 1' in body
