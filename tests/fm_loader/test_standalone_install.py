"""The loader installs alone: the base distribution (no extras) in a fresh venv has fm_loader and no pipeline.

A trainer installs ``fm-data-platform`` without extras; that must give a working ``fm_loader`` (write shards,
read them back through :class:`fm_loader.Loader`, MDS with zstd) and none of Dagster, Spark, Great
Expectations or PyIceberg. Optional loader features fail with an ImportError naming their extra.

torch is installed first, as ``torch==2.13.0`` from pip's local find-links only (``--no-index``): the test
never downloads a CUDA build. Everything else comes from the package index through pip's cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MDS_FIXTURE = REPO / "tests" / "fixtures" / "mds"
PIPELINE_MODULES = ["dagster", "pyspark", "great_expectations", "pyiceberg"]
PIP_FLAGS = [
    "--quiet",
    "--no-compile",
    "--no-input",
    "--disable-pip-version-check",
    "--no-warn-script-location",
]

# Runs inside the fresh venv (python -I, cwd outside the repo, so only installed code is importable) and
# prints one JSON report for the assertions below.
CHECK = r"""
import importlib.metadata
import importlib.util
import json
import os
import sys

args = json.loads(sys.argv[1])
report = {}

import fm_loader
report["fm_loader_file"] = fm_loader.__file__
report["prefix"] = sys.prefix
report["absent"] = {name: importlib.util.find_spec(name) is None for name in args["pipeline_modules"]}
report["base_requires"] = [
    r for r in importlib.metadata.requires("fm-data-platform") or [] if "extra ==" not in r
]

import numpy as np
import torch

from fm_loader import DatasetManifest, Loader, PackedRow, ShardEntry, encode_shard, read_rows
from fm_loader.storage import read_bytes

report["torch"] = torch.__version__
report["torch_cuda"] = torch.version.cuda

# Write two shards and a manifest with the writer the pipeline uses.
rng = np.random.default_rng(7)
folder = args["dataset"]
os.makedirs(os.path.join(folder, "shards"))
expected, entries = [], []
for s, count in enumerate([5, 7]):
    rows = []
    for r in range(count):
        n = int(rng.integers(2, 17))
        rows.append(PackedRow(rng.integers(0, 1000, n), [1, n - 1], [f"d{s}:{r}:0", f"d{s}:{r}:1"]))
    enc = encode_shard(rows, f"shard-{s:06d}", seq_len=16, vocab_size=1000)
    for name, data in enc.files.items():
        with open(os.path.join(folder, "shards", name), "wb") as f:
            f.write(data)
    entries.append(ShardEntry.from_info(enc.info, "shards"))
    expected += [row.tokens.tolist() for row in rows]
manifest_path = os.path.join(folder, "manifest.json")
DatasetManifest("web", "v1", 16, 1000, "tok", "code", entries).save(manifest_path)

# Read it back: every row exactly once per epoch, with its tokens, in fixed-shape batches.
def run(loader):
    seen, shapes = {}, set()
    for batch in loader:
        shapes.add((tuple(batch["input_ids"].shape), str(batch["input_ids"].dtype), str(batch["labels"].dtype)))
        for b, sid in enumerate(batch["sample_ids"].tolist()):
            if sid >= 0:
                n = int(batch["valid_token_count"][b])
                seen[sid] = batch["input_ids"][b, :n].tolist()
    return seen, sorted(shapes)

loader = Loader(manifest_path, global_batch_size=4, seed=3, expected_tokenizer_hash="tok")
seen, shapes = run(loader)
report["rows_match"] = seen == dict(enumerate(expected))
report["shapes"] = shapes
report["state"] = loader.state_dict()
with Loader(manifest_path, global_batch_size=4, seed=3, num_workers=1) as workers:
    report["workers_match"] = run(workers)[0] == seen

# Resume after one batch under another world size: the rest of the same global stream.
def order(loader):
    return [s for batch in loader for s in batch["sample_ids"].tolist()]

full = order(Loader(manifest_path, global_batch_size=4, seed=3))
first = Loader(manifest_path, global_batch_size=4, seed=3)
next(iter(first))
state = first.state_dict()
halves = []
for rank in range(2):
    part = Loader(manifest_path, global_batch_size=4, seed=3, rank=rank, world_size=2)
    part.load_state_dict(state)
    halves.append([b["sample_ids"].tolist() for b in part])
resumed = [s for a, b in zip(*halves) for s in a + b]
report["resume_match"] = resumed == full[4:]
report["read_rows"] = [(name, i, len(row.doc_ids)) for row, name, i in read_rows(manifest_path, limit=6)]

# MosaicML MDS, zstd-compressed shards, read in place.
mds = {"sources": [{"mds": args["mds_tokens"], "seq_len": 32, "vocab_size": 1000}]}
mds_seen, _ = run(Loader(mds, global_batch_size=8))
with open(args["mds_expected"]) as f:
    report["mds_match"] = [mds_seen[i] for i in range(len(mds_seen))] == json.load(f)

# Optional features name the extra to install.
def import_error(fn):
    try:
        fn()
    except ImportError as exc:
        return str(exc)
    return None

def energon():
    import fm_loader.energon  # noqa: F401

def mds_text():
    text = {"sources": [{"mds": args["mds_text"], "text_column": "text", "tokenizer": args["tokenizer"],
                         "seq_len": 32}]}
    Loader(text, global_batch_size=4)

# Each is tried only when its package is absent (with s3fs present the s3:// read would go to the network).
checks = {
    "s3": ("s3fs", lambda: read_bytes("s3://bucket/manifest.json")),
    "energon": ("megatron", energon),
    "mds_text": ("tokenizers", mds_text),
}
report["optional_absent"] = {m: importlib.util.find_spec(m) is None for m, _ in checks.values()}
report["errors"] = {
    feature: import_error(fn) for feature, (m, fn) in checks.items() if report["optional_absent"][m]
}
report["loaded"] = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps(report))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def _pip(python: Path, *args: str, timeout: int = 600) -> None:
    """The running interpreter's pip, installing into ``python``'s environment (``pip --python``)."""
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", *PIP_FLAGS, *args]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"


def _copy_distribution(dest: Path) -> Path:
    """What the sdist holds (project metadata + packages), so the build never writes into the work tree."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("fm_loader", "fm_assets", "fm_resources"):
        if (REPO / package).is_dir():
            shutil.copytree(REPO / package, dest / package, ignore=ignore)
    return dest


@pytest.mark.slow
def test_base_install_has_the_loader_and_no_pipeline(tmp_path):
    env_dir = tmp_path / "venv"
    try:
        venv.create(env_dir, with_pip=False, clear=True)
        python = env_dir / "bin" / "python"
        # The CPU build from pip's local find-links, never a download: with --no-index a missing local file
        # fails here instead of pulling a multi-GB CUDA build from the index.
        _pip(python, "--no-index", "--no-deps", "torch==2.13.0")
        # The project without extras; the constraints keep torch at the installed 2.13.0.
        _pip(
            python, "-c", str(REPO / "scripts" / "constraints.txt"), str(_copy_distribution(tmp_path / "src"))
        )

        (tmp_path / "data").mkdir()
        args = {
            "pipeline_modules": PIPELINE_MODULES,
            "dataset": str(tmp_path / "data" / "web"),
            "mds_tokens": str(MDS_FIXTURE / "tokens"),
            "mds_expected": str(MDS_FIXTURE / "tokens_expected.json"),
            "mds_text": str(MDS_FIXTURE / "text"),
            "tokenizer": str(MDS_FIXTURE / "tokenizer.json"),
        }
        script = tmp_path / "check.py"
        script.write_text(CHECK)
        proc = subprocess.run(
            [str(python), "-I", str(script), json.dumps(args)],
            cwd=tmp_path / "data",
            env={**_env(), "TMPDIR": str(tmp_path)},  # the loader's default cache folder stays in tmp_path
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-6000:]
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(env_dir, ignore_errors=True)  # about 1 GB with torch; do not leave it to pytest's tmp

    # Installed, not the source checkout; no pipeline package is even installed.
    assert report["fm_loader_file"].startswith(report["prefix"]), report["fm_loader_file"]
    assert report["absent"] == dict.fromkeys(PIPELINE_MODULES, True)
    assert not {"dagster", "pyspark", "great_expectations", "pyiceberg", "fm_assets", "fm_resources"} & set(
        report["loaded"]
    )
    assert not [r for r in report["base_requires"] if r.lower().startswith(("dagster", "pyspark"))]
    assert report["torch"].startswith("2.13.0") and report["torch_cuda"] is None

    # The loader works end to end.
    assert report["rows_match"] and report["workers_match"] and report["resume_match"]
    assert report["shapes"] == [[[4, 16], "torch.int32", "torch.int64"]]
    assert report["state"]["epoch"] == 1 and report["state"]["rows_consumed"] == 0
    assert report["read_rows"] == [["shard-000000", i, 2] for i in range(5)] + [["shard-000001", 0, 2]]
    assert report["mds_match"]

    # Optional features: an ImportError that names the extra (when the optional package is indeed absent).
    hints = {"s3": "[s3]", "energon": "[energon]", "mds_text": "[mds-text]"}
    for feature, error in report["errors"].items():
        assert error and f"fm-data-platform{hints[feature]}" in error, (feature, error)
