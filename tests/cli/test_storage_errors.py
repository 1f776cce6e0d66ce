"""A store that cannot answer is reported as such, with its endpoint and never a secret: an unreachable
endpoint, a missing bucket (real S3-compatible server on loopback), and a store that fails mid-run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from fm_assets.engine.store import ObjectStore, StorageUnavailableError, redact

SECRET = "hunter2-very-secret"


def _fm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fm_assets.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is: nothing listens there


def test_redact_hides_inline_passwords():
    assert redact(f"http://admin:{SECRET}@minio:9000/x") == "http://admin:***@minio:9000/x"
    assert redact("s3://bucket/prefix") == "s3://bucket/prefix"


@pytest.mark.parametrize(
    ("endpoint", "kind"),
    [("http://127.0.0.1:{port}", "endpoint unreachable"),
     (f"http://admin:{SECRET}@127.0.0.1:{{port}}", "credentials inside the endpoint URL")],
)  # fmt: skip
def test_unusable_endpoint_is_named_without_its_password(tmp_path, endpoint, kind):
    endpoint = endpoint.format(port=_closed_port())
    env = {
        **os.environ, "FM_ROOT": "s3://fm-test/x", "FM_S3_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_MAX_ATTEMPTS": "1", "DAGSTER_HOME": str(tmp_path),
    }  # fmt: skip
    for command in (["run"], ["report"], ["land", str(tmp_path), "--source", "s", "--license", "MIT"]):
        result = _fm(env, *command)
        assert result.returncode == 2, result.stderr
        assert kind in result.stderr and "127.0.0.1" in result.stderr, result.stderr
        assert "no complete landing batch" not in result.stderr
        assert SECRET not in result.stderr + result.stdout
        assert "Traceback" not in result.stderr


def test_missing_bucket_is_reported(s3_env, tmp_path):
    env = {**os.environ, "FM_ROOT": "s3://no-such-bucket/x", "DAGSTER_HOME": str(tmp_path)}
    result = _fm(env, "report")
    assert result.returncode == 2
    assert "bucket 'no-such-bucket' does not exist" in result.stderr, result.stderr


def test_exists_raises_instead_of_answering_false_when_the_store_cannot_answer():
    store = ObjectStore(
        "s3://fm-test/x",
        {"client_kwargs": {"endpoint_url": f"http://127.0.0.1:{_closed_port()}"}, "skip_instance_cache": True,
         "config_kwargs": {"retries": {"max_attempts": 1}}, "key": "k", "secret": SECRET},
    )  # fmt: skip
    with pytest.raises(StorageUnavailableError, match="endpoint unreachable") as caught:
        store.exists("landing/b1/_batch.json")
    assert SECRET not in str(caught.value)


def test_exists_on_a_real_bucket(s3_env):
    store = ObjectStore("s3://fm-test/exists", {"client_kwargs": {"endpoint_url": s3_env["endpoint"]}})
    assert store.exists("nothing/here") is False
    store.write_bytes("a/b.txt", b"x")
    assert store.exists("a/b.txt") is True
