"""Dagster resources for the stages' side inputs: blocklist file and eval registry (tokenizer: see
``tokenizer_registry``). Each is a thin, configurable handle on the plain source in ``fm_assets.side_inputs``."""

from __future__ import annotations

from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from fm_assets.engine.store import ObjectStore
from fm_assets.side_inputs.benchmarks import DEFAULT_BENCHMARKS
from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.side_inputs.quality_model import (
    PinnedQualityModel,
    ensure_trained,
    load_model_file,
    register_model,
)
from fm_assets.transforms.blocklist.lists import Blocklists
from fm_assets.transforms.text.decontam import BenchmarkIndex


class BlocklistsResource(ConfigurableResource):
    """The blocklist file (YAML/JSON); none means empty lists."""

    path: str | None = Field(default=None, description="Blocklist file (FM_BLOCKLIST_FILE)")

    def load(self) -> Blocklists:
        return BlocklistSource(self.path).load()


class EvalRegistryResource(ConfigurableResource):
    """The benchmarks decontaminate guards against: registered names plus an optional user JSONL."""

    path: str | None = Field(default=None, description="JSONL(.gz) of {'text': ...} (FM_EVAL_REGISTRY_FILE)")
    benchmarks: list[str] | None = Field(
        default=None, description="Registered benchmark names (FM_EVAL_BENCHMARKS; default: all built in)"
    )

    def registry(self) -> EvalRegistry:
        names = DEFAULT_BENCHMARKS if self.benchmarks is None else tuple(self.benchmarks)
        return EvalRegistry(self.path, names)

    def index(self, store: ObjectStore | None = None) -> BenchmarkIndex:
        return self.registry().index(store)

    def describe(self) -> str:
        return self.registry().describe()

    def spec(self, store: ObjectStore | None = None) -> dict[str, Any]:
        return self.registry().spec(store)


class QualityModelResource(ConfigurableResource):
    """Where the quality_model asset gets its model: a given file, else one trained on a sample-data folder."""

    model_file: str | None = Field(default=None, description="A trained model .npz (FM_QUALITY_MODEL_FILE)")
    train_dir: str | None = Field(default=None, description="`fm sample-data` folder (FM_QUALITY_TRAIN_DIR)")

    def register(self, store: ObjectStore) -> tuple[PinnedQualityModel, str] | None:
        """Register and pin the configured model (None when neither a file nor a folder is configured)."""
        if self.model_file:
            data = load_model_file(self.model_file).to_bytes()
            return register_model(store, data, f"file:{self.model_file}"), "registered file"
        if self.train_dir:
            return ensure_trained(store, self.train_dir)
        return None
