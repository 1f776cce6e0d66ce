"""The whole graph with FM_ROOT on S3 (moto's server on loopback), read back by fm_loader from S3."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest
from sample_licence import package_licence

from fm_assets.cli.runner import run_batches
from fm_assets.defs.resources.object_store import ObjectStoreResource
from fm_assets.engine.landing import land_batch
from fm_assets.engine.refs import read_success
from fm_assets.settings import load_settings
from fm_assets.stages.registry import CHAIN_NAMES
from fm_loader import Loader

pytestmark = [pytest.mark.slow]


def test_pipeline_on_s3_root(fm_env, s3_env, real_sample, monkeypatch):
    root = f"s3://{s3_env['bucket']}/run-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("FM_ROOT", root)
    monkeypatch.setenv("FM_NEAR_DEDUP", "0")  # Spark reads local files; its S3 path is the cluster's business
    store = ObjectStoreResource(root=root, s3_endpoint_url=s3_env["endpoint"]).store()
    package = sorted(real_sample["packages"])[-1]
    src = Path(real_sample["dest"]) / package
    batch = land_batch(store, src, source="s3demo", license_id=package_licence(src), namespace="cloud").batch

    assert run_batches(load_settings()) == {}
    for stage in CHAIN_NAMES["text"]:
        success = read_success(store, stage, batch)
        counts = success.counts.to_json()
        assert counts["records_in"] == counts["records_out"] + counts["records_rejected"], stage
    shard = read_success(store, "shard", batch)
    assert shard.artifacts["rows"] > 0

    # the objects are really in the bucket
    keys = [
        obj["Key"]
        for obj in boto3.client("s3", endpoint_url=s3_env["endpoint"], region_name="us-east-1")
        .list_objects_v2(Bucket=s3_env["bucket"], Prefix=root.split("/", 3)[3])
        .get("Contents", [])
    ]
    assert any(key.endswith(".tar") for key in keys)
    assert any("/cas/" in key for key in keys)

    version = store.read_json("datasets/fm-demo/LATEST.json")["version"]
    loader = Loader(
        store.uri(f"datasets/fm-demo/{version}/manifest.json"),
        global_batch_size=4,
        rank=0,
        world_size=1,
        seed=0,
        storage_options={"client_kwargs": {"endpoint_url": s3_env["endpoint"]}},
    )
    batch_tensors = next(iter(loader))
    assert int(batch_tensors["valid_token_count"].sum()) > 0
