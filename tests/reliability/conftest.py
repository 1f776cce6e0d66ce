"""A small real root built once per module (one batch of real text through every stage and the release),
and ``fm`` invoked as a user would, on a private copy of it per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from sample_licence import package_licence

from fm_assets.engine.refs import read_success
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import CHAIN_NAMES


@dataclass
class Root:
    path: Path
    env: dict[str, str]
    batch: str = ""

    @property
    def store(self) -> ObjectStore:
        return ObjectStore(str(self.path))

    def fm(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fm_assets.cli.main", *args],
            env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def versions(self) -> dict[str, str]:
        return {
            stage: read_success(self.store, stage, self.batch).data_version for stage in CHAIN_NAMES["text"]
        }

    def output_file(self, stage: str, pattern: str) -> Path:
        prefix = read_success(self.store, stage, self.batch).prefix
        found = sorted((self.path / prefix).glob(pattern))
        assert found, f"no {pattern} in {stage}'s output"
        return found[len(found) // 2]


def env_for(root: Path, tokenizer_file: Path) -> dict[str, str]:
    return {
        **os.environ,
        "FM_ROOT": str(root),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "FM_TOKENIZER_FILE": str(tokenizer_file),
        "FM_SEQ_LEN": "512",
        "FM_LAND_ROWS_PER_PART": "25",
        "FM_ROWS_PER_SHARD": "64",
        "FM_MIN_PACKING_EFFICIENCY": "0.95",
        "FM_PROGRESS": "0",
        "FM_WORKERS": "1",
    }


@pytest.fixture(scope="module")
def built_root(real_sample, tokenizer_file, tmp_path_factory) -> Root:
    path = tmp_path_factory.mktemp("reliable") / "root"
    root = Root(path, env_for(path, tokenizer_file))
    (path / "dagster_home").mkdir(parents=True)
    (path / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    package = sorted(real_sample["packages"])[0]
    src = Path(real_sample["dest"]) / package
    landed = root.fm("land", str(src), "--source", "reliable", "--license", package_licence(src))
    assert landed.returncode == 0, landed.stderr
    root.batch = landed.stdout.strip()
    run = root.fm("run")
    assert run.returncode == 0, run.stderr[-3000:]
    return root


@pytest.fixture
def root(built_root, tmp_path) -> Root:
    """A private copy of the built root (its Dagster home included)."""
    path = tmp_path / "root"
    shutil.copytree(built_root.path, path, symlinks=True)
    env = {**built_root.env, "FM_ROOT": str(path), "DAGSTER_HOME": str(path / "dagster_home")}
    return Root(path, env, built_root.batch)


def flip_bit(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if offset is None else offset
    data[at] ^= 0x10
    path.write_bytes(bytes(data))
