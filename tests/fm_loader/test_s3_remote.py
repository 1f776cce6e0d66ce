"""Remote shards through a real S3-compatible server (moto's threaded server on loopback), via ``s3://`` URIs."""

from __future__ import annotations

import os

import pytest
from loader_helpers import collect, make_dataset

from fm_loader import Loader

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")


@pytest.fixture
def s3_endpoint(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def upload_folder(endpoint: str, bucket: str, folder: str, prefix: str) -> int:
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    uploaded = 0
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            client.upload_file(path, bucket, f"{prefix}/{os.path.relpath(path, folder)}")
            uploaded += 1
    return uploaded


def test_s3_stream_equals_local_and_second_epoch_is_served_from_cache(s3_endpoint, tmp_path):
    local = make_dataset(str(tmp_path / "ds"), [11, 7, 13], seq_len=32)
    uploaded = upload_folder(s3_endpoint, "fm-data", str(tmp_path / "ds"), "web/v1")
    assert uploaded == 7  # the manifest plus a .tar and an .idx per shard
    options = {"client_kwargs": {"endpoint_url": s3_endpoint}}
    remote = "s3://fm-data/web/v1/manifest.json"
    cache = str(tmp_path / "cache")

    first = Loader(remote, global_batch_size=4, cache_dir=cache, storage_options=options)
    first_epoch = collect(first)
    assert first_epoch == collect(Loader(local, global_batch_size=4))
    m = first.metrics()
    assert m["cache_misses"] == 6 and m["cache_bytes_downloaded"] > 0  # every tar and idx fetched once

    # The next epoch (here resumed in a new loader, as after a restart) reads only the local cache.
    again = Loader(remote, global_batch_size=4, cache_dir=cache, storage_options=options)
    again.load_state_dict(first.state_dict())
    assert first.state_dict()["epoch"] == 1
    batches = [b["input_ids"].clone() for b in Loader(local, global_batch_size=4, epochs=2)][-8:]
    again.epochs = 2
    second = list(again)
    assert len(second) == 8 and all((a["input_ids"] == b).all() for a, b in zip(second, batches, strict=True))
    m2 = again.metrics()
    assert m2["cache_misses"] == 0 and m2["cache_bytes_downloaded"] == 0 and m2["cache_hits"] >= 6
