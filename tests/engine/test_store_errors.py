"""``ObjectStore.exists()`` tells "absent" from "cannot answer": refused credentials (a real S3-compatible
server that checks signatures), an unknown host, a closed port - each named, with a hint, never a secret."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import boto3
import pytest

from fm_assets.engine.store import ObjectStore, StorageUnavailableError, redact

SECRET = "wrong-secret-Zq9x7"
FM = [sys.executable, "-m", "fm_assets.cli.main"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is: nothing listens there


@pytest.fixture(scope="module")
def auth_s3() -> Iterator[dict[str, str]]:
    """moto's S3 server in its own process with signature checking on (after 3 unauthenticated IAM calls that
    create a user, its key and its policy), bucket ``fm-auth``."""
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "3"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "moto server did not start"
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        anonymous = {"aws_access_key_id": "x", "aws_secret_access_key": "x", "region_name": "us-east-1"}
        iam = boto3.client("iam", endpoint_url=endpoint, **anonymous)
        iam.create_user(UserName="fm")
        key = iam.create_access_key(UserName="fm")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="fm", PolicyName="all", PolicyDocument=json.dumps(policy))
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
            region_name="us-east-1",
        ).create_bucket(Bucket="fm-auth")
        yield {"endpoint": endpoint, "key": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    finally:
        server.terminate()
        server.wait(timeout=30)


def _store(endpoint: str, key: str, secret: str) -> ObjectStore:
    return ObjectStore(
        "s3://fm-auth/root",
        {
            "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
            "config_kwargs": {"retries": {"max_attempts": 1}},
            "skip_instance_cache": True,
            "key": key,
            "secret": secret,
        },
    )


def test_right_credentials_absent_is_false_present_is_true(auth_s3):
    store = _store(auth_s3["endpoint"], auth_s3["key"], auth_s3["secret"])
    assert store.exists("landing/nothing/_batch.json") is False
    store.write_bytes("a/b.txt", b"x")
    assert store.exists("a/b.txt") is True
    store.check_reachable()


@pytest.mark.parametrize("which", ["wrong secret", "unknown key"])
def test_wrong_credentials_are_named_not_taken_for_empty_storage(auth_s3, which):
    key = auth_s3["key"] if which == "wrong secret" else "AKIAUNKNOWNKEY000000"
    store = _store(auth_s3["endpoint"], key, SECRET)
    for call in (lambda: store.exists("landing/b1/_batch.json"), store.check_reachable):
        with pytest.raises(StorageUnavailableError) as caught:
            call()
        message = str(caught.value)
        assert "credentials refused" in message and "AWS_ACCESS_KEY_ID" in message, message
        assert "s3://fm-auth/root" in message and auth_s3["endpoint"] in message
        assert SECRET not in message and key not in message


def test_unknown_host_is_a_dns_failure():
    store = _store("http://no-such-host.invalid:9000", "k", SECRET)
    with pytest.raises(StorageUnavailableError, match=r"DNS: host name not found") as caught:
        store.exists("x")
    assert "no-such-host.invalid" in str(caught.value) and SECRET not in str(caught.value)


def test_closed_port_is_connection_refused():
    store = _store(f"http://127.0.0.1:{_free_port()}", "k", SECRET)
    with pytest.raises(StorageUnavailableError, match=r"connection refused.*FM_S3_ENDPOINT_URL"):
        store.exists("x")


def test_redact_hides_passwords_key_ids_and_given_secrets():
    text = f"http://admin:{SECRET}@minio:9000 key AKIAIOSFODNN7EXAMPLE token tok-123"
    assert redact(text, ["tok-123"]) == "http://admin:***@minio:9000 key *** token ***"


def test_fm_with_wrong_credentials_stops_first_without_the_secret(auth_s3, tmp_path):
    env = {
        **os.environ,
        "FM_ROOT": "s3://fm-auth/root",
        "FM_S3_ENDPOINT_URL": auth_s3["endpoint"],
        "AWS_ACCESS_KEY_ID": auth_s3["key"],
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
        "DAGSTER_HOME": str(tmp_path),
    }
    for command in (["run"], ["report"], ["land", str(tmp_path), "--source", "s", "--license", "MIT"]):
        result = subprocess.run([*FM, *command], env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 2, result.stderr
        assert "credentials refused" in result.stderr, result.stderr
        assert "no complete landing batch" not in result.stderr and "Traceback" not in result.stderr
        assert SECRET not in result.stderr + result.stdout and auth_s3["key"] not in result.stderr
