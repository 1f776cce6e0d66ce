"""Issue 18 item 6: a full disk and an S3 endpoint lost mid-command end in one line (no traceback, no .tmp
left in the batch), and `fm -v` never prints an access key id or a SigV4 signature."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fm_assets.engine.storage_errors import one_line_error
from fm_assets.engine.store import ObjectStore

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 1 MB tmpfs (needs the right to mount; skipped where there is none)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fm_assets.cli.main", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})  # fmt: skip


def test_land_on_a_full_disk_is_one_line_and_leaves_nothing_in_the_batch(tiny_disk, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "big.jsonl").write_bytes(b'{"text": "' + b"x" * (3 << 20) + b'"}\n')
    result = fm("--root", str(tiny_disk / "root"), "land", str(src), "--source", "web", "--license", "MIT",
                env={"DAGSTER_HOME": str(tmp_path / "dh")})  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "disk full or failing" in result.stderr and "No space left on device" in result.stderr
    assert [p.name for p in (tiny_disk / "root" / "landing").rglob("*")] == []  # no .tmp, no half batch


def test_sqlite_disk_full_is_one_disk_line(tiny_disk):
    database = sqlite3.connect(tiny_disk / "instance.db")
    database.execute("create table t (x blob)")
    with pytest.raises(sqlite3.OperationalError) as caught:
        for _ in range(1000):
            database.execute("insert into t values (?)", (os.urandom(64 << 10),))
            database.commit()
    message = one_line_error(caught.value, where="/r")
    assert message is not None and "SQLite database cannot write" in message and "\n" not in message


def test_an_endpoint_lost_mid_command_is_one_line_without_secrets(s3_env):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server._server.server_address[:2]  # type: ignore[union-attr]
    endpoint = f"http://{host}:{port}"
    import boto3

    boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
                 region_name="us-east-1").create_bucket(Bucket="lost")  # fmt: skip
    store = ObjectStore("s3://lost/x", {"client_kwargs": {"endpoint_url": endpoint}, "key": KEY_ID,
                                        "secret": SECRET, "skip_instance_cache": True,
                                        "config_kwargs": {"retries": {"max_attempts": 1}}})  # fmt: skip
    store.write_bytes("a.txt", b"x")
    server.stop()  # the endpoint goes away mid-command
    with pytest.raises(Exception) as caught:
        store.read_bytes("a.txt")
    message = one_line_error(caught.value, where=store.endpoint, endpoint_url=endpoint, secrets=[SECRET])
    assert message is not None and "endpoint unreachable" in message and endpoint in message
    assert SECRET not in message and KEY_ID not in message and "\n" not in message


def test_verbose_never_prints_the_access_key_id_or_a_signature(s3_env, tmp_path):
    env = {"FM_ROOT": "s3://fm-test/verbose", "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET,
           "DAGSTER_HOME": str(tmp_path)}  # fmt: skip
    src = tmp_path / "docs.jsonl"
    src.write_text('{"text": "hello"}\n')
    landed = fm("-v", "land", str(src), "--source", "web", "--license", "MIT", env=env)
    report = fm("-v", "report", env=env)
    for result in (landed, report):
        assert result.returncode == 0, result.stderr[-2000:]
        logged = result.stdout + result.stderr
        assert "DEBUG" in logged  # -v did log
        assert KEY_ID not in logged and SECRET not in logged
        assert not re.search(r"Signature=[0-9a-f]{16}", logged) and not re.search(r"Credential=AKIA", logged)
