"""Shared fixtures: a small slice of real public text, a trained tokenizer, an isolated FM_ROOT + DAGSTER_HOME,\nan S3 server and a loopback Spark cluster."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
os.environ.setdefault("FM_PROGRESS", "0")

SAMPLE_DOCS_PER_PACKAGE = 60


@pytest.fixture(scope="session")
def real_sample(tmp_path_factory) -> dict:
    """Real documents from the Debian doc packages (or the Python-stdlib fallback), fetched once per session."""
    from fm_assets.sample_data import fetch_sample_data

    cache = os.environ.get("FM_TEST_SAMPLE_CACHE")
    dest = Path(cache) if cache else tmp_path_factory.mktemp("sample")
    return fetch_sample_data(dest, max_docs=SAMPLE_DOCS_PER_PACKAGE, progress=False)


@pytest.fixture(scope="session")
def tokenizer_file(real_sample, tmp_path_factory) -> Path:
    """A byte-level BPE trained on the sample (so every e2e test tokenizes with the same ids)."""
    import json

    from fm_assets.engine.store import ObjectStore
    from fm_assets.side_inputs.tokenizer import TokenizerRegistry

    root = tmp_path_factory.mktemp("tok")
    registry = TokenizerRegistry(ObjectStore(str(root / "store")))

    def texts():
        for package in sorted(real_sample["packages"]):
            for path in sorted((Path(real_sample["dest"]) / package).glob("*.jsonl")):
                for line in path.read_text().splitlines():
                    yield json.loads(line)["text"]

    sha = registry.train_bpe(texts(), vocab_size=2048)
    out = root / "tokenizer.json"
    out.write_bytes(registry.store.read_bytes(f"tokenizers/{sha}.json"))
    return out


@pytest.fixture
def fm_env(tmp_path, monkeypatch, tokenizer_file):
    """An isolated platform: FM_ROOT, DAGSTER_HOME and small work units so tests exercise resume paths."""
    root = tmp_path / "root"
    monkeypatch.setenv("FM_ROOT", str(root))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("FM_TOKENIZER_FILE", str(tokenizer_file))
    monkeypatch.setenv("FM_SEQ_LEN", "512")
    monkeypatch.setenv("FM_LAND_ROWS_PER_PART", "25")
    monkeypatch.setenv("FM_ROWS_PER_SHARD", "64")
    monkeypatch.setenv("FM_SPARK_MASTER", "local[2]")
    monkeypatch.setenv("FM_MIN_PACKING_EFFICIENCY", "0.95")  # test partitions hold only ~80 rows
    (tmp_path / "dagster_home").mkdir()
    (tmp_path / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return root


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto in server mode) on loopback, with bucket ``fm-test``."""
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    ).create_bucket(Bucket="fm-test")
    yield endpoint
    server.stop()


@pytest.fixture
def s3_env(monkeypatch, s3_server):
    import boto3

    # the server shares moto's in-process state: a test using moto's mock_aws resets it on exit (and the bucket
    # with it), so every test makes sure its bucket is there
    client = boto3.client(
        "s3",
        endpoint_url=s3_server,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    if "fm-test" not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
        client.create_bucket(Bucket="fm-test")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("FM_S3_ENDPOINT_URL", s3_server)
    return {"endpoint": s3_server, "bucket": "fm-test"}


@pytest.fixture(scope="session")
def spark_cluster_master(tmp_path_factory):
    """A standalone Spark master + 2 workers (1 core each, 1g for executors) on loopback, for the session:
    tests/loopback_spark.py starts it and stops every daemon (and this process's session) at the end."""
    from loopback_spark import loopback_cluster

    with loopback_cluster(workers=2, state=tmp_path_factory.mktemp("spark-cluster")) as master:
        yield master
