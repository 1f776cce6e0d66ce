"""Dagster resources for the stages' side inputs: blocklist file and eval registry (tokenizer: see
``tokenizer_registry``). Each is a thin, configurable handle on the plain source in ``fm_assets.side_inputs``."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from fm_assets.side_inputs.blocklists import BlocklistSource
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.transforms.blocklist.lists import Blocklists
from fm_assets.transforms.text.decontam import ContaminationIndex


class BlocklistsResource(ConfigurableResource):
    """The blocklist file (YAML/JSON); none means empty lists."""

    path: str | None = Field(default=None, description="Blocklist file (FM_BLOCKLIST_FILE)")

    def load(self) -> Blocklists:
        return BlocklistSource(self.path).load()


class EvalRegistryResource(ConfigurableResource):
    """The eval passages decontaminate guards against; none means the bundled set."""

    path: str | None = Field(default=None, description="JSONL(.gz) of {'text': ...} (FM_EVAL_REGISTRY_FILE)")

    def index(self) -> ContaminationIndex:
        return EvalRegistry(self.path).index()

    def describe(self) -> str:
        return EvalRegistry(self.path).describe()
