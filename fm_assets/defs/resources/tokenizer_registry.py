"""Dagster resource naming the tokenizer: a given ``tokenizer.json`` to register and pin, or BPE training settings."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from fm_assets.side_inputs.tokenizer import TokenizerSpec


class TokenizerRegistryResource(ConfigurableResource):
    """Which tokenizer the tokenize stage uses: a given ``tokenizer.json``, else the pinned one, else a trained BPE."""

    tokenizer_file: str | None = Field(
        default=None, description="Path to a tokenizer.json to register and pin"
    )
    train_vocab_size: int = Field(default=8192, description="Vocab size when a BPE is trained from the data")
    train_sample_docs: int = Field(default=20000, description="Documents sampled to train the BPE")

    def spec(self) -> TokenizerSpec:
        return TokenizerSpec(self.tokenizer_file, self.train_vocab_size, self.train_sample_docs)
