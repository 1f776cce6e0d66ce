"""The legal reader's walkthrough on the real pipeline (Dagster, Spark, Iceberg, Lance) through the `fm`
command: cloud, on_device, quarantine and an out-of-policy batch land; the walls hold in every release,
table and dataset; quarantine is processed only after a recorded promotion; a revocation is traced to every
version, shard, snapshot and run that held the documents and proved gone from the newest releases."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lance
import pyarrow.parquet as pq
import pytest
from pipeline_env import set_pipeline_env

from fm_assets.compliance.namespaces import NamespaceWallError
from fm_assets.datasets.release import assemble_release
from fm_assets.defs.resources.iceberg import IcebergCatalogResource
from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_loader.manifest import DatasetManifest

pytestmark = [pytest.mark.slow]
FM = [sys.executable, "-m", "fm_assets.cli.main"]


def fm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FM, *args], env=dict(os.environ), capture_output=True, text=True, timeout=900)


def ok(*args: str) -> str:
    result = fm(*args)
    assert result.returncode == 0, f"fm {' '.join(args)}: {result.stdout}\n{result.stderr}"
    return result.stdout.strip()


@pytest.fixture(scope="module")
def world(real_sample, tokenizer_file, tmp_path_factory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("compliance")
    with pytest.MonkeyPatch.context() as env:
        set_pipeline_env(env, tmp, tokenizer_file)
        packages = [Path(real_sample["dest"]) / name for name in sorted(real_sample["packages"])]
        world: dict[str, Any] = {"root": tmp / "root", "store": ObjectStore(str(tmp / "root"))}
        world["cloud"] = ok("land", str(packages[0]), "--source", "docs-a", "--license", "CC-BY-SA-3.0")
        world["on_device"] = ok("land", str(packages[-1]), "--source", "docs-b", "--license", "PSF-2.0",
                                "--namespace", "on_device")  # fmt: skip
        world["quarantine"] = ok("land", str(packages[1]), "--source", "forum", "--license", "CC-BY-SA-3.0",
                                 "--namespace", "quarantine")  # fmt: skip
        world["vendor"] = ok(
            "land", str(packages[0]), "--source", "vendor", "--license", "LicenseRef-Vendor-EULA"
        )
        world["first_run"] = fm("run")
        world["first_cloud"] = _latest(world["store"], "fm-demo")
        world["run_unreviewed"] = fm("run", world["quarantine"])
        world["list_before"] = fm("quarantine", "list", "--json")
        world["promote_anonymous"] = fm(
            "quarantine", "promote", world["quarantine"], "--to", "cloud", "--reason", "x"
        )
        world["promote"] = fm("quarantine", "promote", world["quarantine"], "--to", "cloud",
                              "--reviewer", "jane.doe", "--reason", "LEGAL-42 cleared")  # fmt: skip
        world["second_run"] = fm("run", world["quarantine"])
        world["cloud_before_revoke"] = _latest(world["store"], "fm-demo")
        world["revoke"] = fm("revoke", "--source", "docs-a", "--license", "CC-BY-SA-3.0",
                             "--reason", "LEGAL-77 permission withdrawn", "--requested-by", "legal")  # fmt: skip
        world["after_pair_revoke"] = _latest(world["store"], "fm-demo")
        world["hash_doc"], world["hash_text"] = _one_document(
            world["store"], world["quarantine"], _shard_doc_ids(world, world["after_pair_revoke"])
        )
        world["hash_revoke"] = fm("revoke", "--doc-hash", hashlib.sha256(world["hash_text"].encode()).hexdigest(),
                                  "--reason", "LEGAL-78 personal data in one page")  # fmt: skip
        world["audit_md"] = fm("audit", "--format", "md")
        yield world


def _one_document(store: ObjectStore, batch: str, released: set[str]) -> tuple[str, str]:
    """(doc id, text) of a released document of ``batch``, its text as the blocklist stage sees it (dedup's
    output, before normalize)."""
    for part in read_success(store, "dedup", batch).parts:
        with store.open(part) as handle:
            for row in pq.read_table(handle, columns=["doc_id", "text"]).to_pylist():
                if row["doc_id"] in released:
                    return row["doc_id"], row["text"]
    raise AssertionError(f"no document of {batch} is released")


def _shard_doc_ids(world: dict[str, Any], version: str) -> set[str]:
    """Every document id in the samples of a cloud release version, read from the shard tars themselves."""
    found: set[str] = set()
    folder = world["root"] / "datasets" / "fm-demo" / version
    for entry in _manifest(world["store"], "fm-demo", version).shards:
        with tarfile.open(folder / entry.path) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".json"):
                    ids = json.loads(tar.extractfile(member).read())["doc_ids"]  # type: ignore[union-attr]
                    found |= {i.split("@")[0] for i in ids}
    return found


def _latest(store: ObjectStore, name: str) -> str:
    return store.read_json(f"datasets/{name}/LATEST.json")["version"]


def _manifest(store: ObjectStore, name: str, version: str) -> DatasetManifest:
    return DatasetManifest.from_json(store.read_bytes(f"datasets/{name}/{version}/manifest.json"))


def _card(store: ObjectStore, name: str, version: str) -> dict[str, Any]:
    return store.read_json(f"datasets/{name}/{version}/card.json")


def _report(world: dict[str, Any], which: int = 0) -> dict[str, Any]:
    """The report of the first (0) or second (1) revocation."""
    paths = sorted((world["root"] / "compliance" / "revocations").glob("*/report.json"))
    return json.loads(paths[which].read_text())


def test_the_first_run_skips_the_unreviewed_batch_and_builds_one_release_per_namespace(world):
    # the vendor batch (licence policy) and the unreviewed quarantine batch are held back: exit 1, named
    assert world["first_run"].returncode == 1, world["first_run"].stderr
    assert f"held back {world['vendor']}" in world["first_run"].stderr
    assert f"{world['quarantine']} is in quarantine awaiting review" in world["first_run"].stderr
    store = world["store"]
    first = world["first_cloud"]
    assert world["vendor"] in json.dumps(_card(store, "fm-demo", first)["held_back"])
    assert _card(store, "fm-demo", first)["namespace"] == "cloud"
    (released,) = _card(store, "fm-demo", first)["batches"]
    assert (released["batch"], released["namespace"], released["landed_namespace"]) == (
        world["cloud"],
        "cloud",
        "cloud",
    )
    on_device = _latest(store, "fm-demo-on_device")
    manifest = _manifest(store, "fm-demo-on_device", on_device)
    assert manifest.namespace == "on_device" and manifest.extra["batches"] == [world["on_device"]]
    assert all(world["on_device"] in entry.path for entry in manifest.shards)


def test_no_cloud_release_ever_references_on_device_or_unreviewed_shards(world):
    store = world["store"]
    for version in (p.name for p in (world["root"] / "datasets" / "fm-demo").iterdir() if p.is_dir()):
        manifest = _manifest(store, "fm-demo", version)
        assert manifest.namespace == "cloud"
        for entry in manifest.shards:
            assert world["on_device"] not in entry.path


def test_a_release_that_would_mix_namespaces_is_refused(world):
    with pytest.raises(NamespaceWallError, match="would include 1 batch"):
        assemble_release(world["store"], "fm-demo", "cloud", batches=[world["cloud"], world["on_device"]])
    with pytest.raises(NamespaceWallError, match="not a release namespace"):
        assemble_release(world["store"], "fm-demo", "quarantine")


def test_the_views_are_walled_per_namespace(world):
    catalog = IcebergCatalogResource(root=str(world["root"])).catalog()
    cloud = catalog.load_table("fm.curated_documents").scan(selected_fields=("batch", "namespace")).to_arrow()
    assert set(cloud.column("namespace").to_pylist()) == {"cloud"}
    assert world["on_device"] not in set(cloud.column("batch").to_pylist())
    assert world["quarantine"] in set(cloud.column("batch").to_pylist())  # promoted: processed as cloud
    on_device = catalog.load_table("fm.curated_documents_on_device").scan().to_arrow()
    assert set(on_device.column("batch").to_pylist()) == {world["on_device"]}
    assert set(on_device.column("namespace").to_pylist()) == {"on_device"}
    lance_cloud = lance.dataset(str(world["root"] / "lance" / "documents.lance")).to_table(columns=["batch"])
    lance_device = lance.dataset(str(world["root"] / "lance" / "documents_on_device.lance")).to_table(
        columns=["batch"]
    )
    assert world["on_device"] not in set(lance_cloud.column("batch").to_pylist())
    assert set(lance_device.column("batch").to_pylist()) == {world["on_device"]}


def test_quarantine_is_processed_only_after_a_recorded_promotion(world):
    assert world["run_unreviewed"].returncode == 2
    assert "awaiting review" in world["run_unreviewed"].stderr
    assert world["promote_anonymous"].returncode == 2 and "--reviewer" in world["promote_anonymous"].stderr
    assert world["promote"].returncode == 0, world["promote"].stderr
    assert world["second_run"].returncode == 1, world[
        "second_run"
    ].stderr  # the vendor batch is still held back
    assert f"held back {world['quarantine']}" not in world["second_run"].stderr
    record = world["store"].read_json(f"compliance/promotions/{world['quarantine']}.json")
    assert (record["reviewer"], record["to"], record["from_namespace"]) == ("jane.doe", "cloud", "quarantine")
    batches = _card(world["store"], "fm-demo", world["cloud_before_revoke"])["batches"]
    assert world["quarantine"] in [b["batch"] for b in batches]


def test_quarantine_list_shows_what_awaits_review(world):
    assert world["list_before"].returncode == 0, world["list_before"].stderr
    (row,) = json.loads(world["list_before"].stdout)
    assert (row["batch"], row["status"], row["decision"]) == (world["quarantine"], "awaiting_review", None)


def test_a_licence_outside_the_policy_is_held_back_with_the_reason(world):
    held = _card(world["store"], "fm-demo", _latest(world["store"], "fm-demo"))["held_back"]
    (entry,) = [h for h in held if h["batch"] == world["vendor"]]
    assert (
        "LicenseRef-Vendor-EULA" in entry["reason"] and "outside the cloud release policy" in entry["reason"]
    )


def test_revocation_finds_every_place_the_documents_were(world):
    assert world["revoke"].returncode == 0, world["revoke"].stdout + world["revoke"].stderr
    report = _report(world)
    assert report["affected"]["batches"] == [world["cloud"]] and report["affected"]["documents"] > 0
    held = {(v["dataset"], v["version"]) for v in report["dataset_versions"]}
    assert ("fm-demo", world["cloud_before_revoke"]) in held
    assert all(dataset == "fm-demo" for dataset, _ in held)  # never the on_device release
    assert report["shards"] and all(world["cloud"] in shard for shard in report["shards"])
    assert report["iceberg_snapshots"] and not any(s["current"] for s in report["iceberg_snapshots"])
    assert report["lance_versions"] and not any(v["current"] for v in report["lance_versions"])
    assert {r["asset"] for r in report["runs"]} == {"shard", "dataset_release"}
    assert all(r["partition"] == world["cloud"] for r in report["runs"] if r["asset"] == "shard")


def test_older_versions_are_marked_revoked_and_the_newest_is_verified_clean(world):
    report, store = _report(world), world["store"]
    newest = world["after_pair_revoke"]  # the newest version right after this revocation
    assert newest != world["cloud_before_revoke"]
    old = _manifest(store, "fm-demo", world["cloud_before_revoke"])
    assert old.revoked is not None and old.revoked["superseded_by"] == newest
    assert old.revoked["revocation_id"] == report["revocation"]["id"]
    assert _card(store, "fm-demo", world["cloud_before_revoke"])["revoked"] == old.revoked
    assert _manifest(store, "fm-demo", _latest(store, "fm-demo")).revoked is None
    assert report["verified"] and all(v["samples_scanned"] > 0 for v in report["verification"])
    # independently of the report: read every sample of the newest cloud shards
    revoked = set()
    for part in read_success(store, "land", world["cloud"]).parts:
        with store.open(part) as handle:
            revoked |= set(pq.read_table(handle, columns=["doc_id"]).column("doc_id").to_pylist())
    assert revoked & _shard_doc_ids(world, world["cloud_before_revoke"])  # they were there
    assert not revoked & _shard_doc_ids(world, newest)  # and are gone


def test_a_revocation_by_document_hash_removes_exactly_that_document(world):
    assert world["hash_revoke"].returncode == 0, world["hash_revoke"].stdout + world["hash_revoke"].stderr
    report = _report(world, 1)
    assert report["affected"] == {"documents": 1, "batches": [world["quarantine"]]}
    assert {(v["dataset"], v["version"]) for v in report["dataset_versions"]} >= {
        ("fm-demo", world["after_pair_revoke"])
    }
    assert report["verified"]
    newest = _latest(world["store"], "fm-demo")
    before, after = _shard_doc_ids(world, world["after_pair_revoke"]), _shard_doc_ids(world, newest)
    assert world["hash_doc"] in before and world["hash_doc"] not in after
    assert before - after == {world["hash_doc"]}  # nothing else went
    marked = _manifest(world["store"], "fm-demo", world["after_pair_revoke"]).revoked
    assert marked is not None and marked["revocation_id"] == report["revocation"]["id"]


def test_the_loader_refuses_a_revoked_version_and_a_namespace_it_was_not_given(world):
    fm_loader = pytest.importorskip("fm_loader")
    if not hasattr(fm_loader, "NamespaceError"):
        pytest.skip("fm_loader.NamespaceError is not in this branch yet (loader-side enforcement)")
    root = world["root"] / "datasets"
    on_device = root / "fm-demo-on_device" / _latest(world["store"], "fm-demo-on_device") / "manifest.json"
    with pytest.raises(fm_loader.NamespaceError):
        fm_loader.Loader(str(on_device), global_batch_size=2, allowed_namespaces=["cloud"])
    old = root / "fm-demo" / world["cloud_before_revoke"] / "manifest.json"
    with pytest.raises(fm_loader.RevokedDatasetError):
        fm_loader.Loader(str(old), global_batch_size=2, allowed_namespaces=["cloud"])


def test_the_markdown_audit_answers_the_legal_questions(world):
    assert world["audit_md"].returncode == 0, world["audit_md"].stderr
    text = world["audit_md"].stdout
    for section in ("# Compliance audit", "## Releases per namespace", "## Quarantine decisions",
                    "## Licence policy", "## Revocations"):  # fmt: skip
        assert section in text
    assert "| fm-demo-on_device | text | on_device |" in text
    assert "jane.doe" in text and "LEGAL-42 cleared" in text
    assert "outside the cloud release policy" in text
    revocation_id = _report(world)["revocation"]["id"]
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {revocation_id}")]
    assert "LEGAL-77 permission withdrawn" in row and "| yes |" in row


def test_revoke_refuses_a_request_without_reason_or_target(world):
    missing_reason = fm("revoke", "--source", "docs-b", "--no-run")
    assert missing_reason.returncode == 2 and "--reason" in missing_reason.stderr
    both = fm("revoke", "--source", "docs-b", "--doc-hash", hashlib.sha256(b"x").hexdigest(), "--reason", "x")
    assert both.returncode == 2 and "not both" in both.stderr
    everything = fm("revoke", "--source", "*", "--license", "*", "--reason", "x")
    assert everything.returncode == 2 and "revoke everything" in everything.stderr
